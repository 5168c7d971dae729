"""Fetch Spark's own Kafka connector (spark-sql-kafka-0-10) for one PySpark, into
``${XDG_CACHE_HOME:-~/.cache}/pylog/spark-kafka/pyspark-<version>/`` (run by `make spark-kafka`):

    python tests/spark/kafka/fetch.py .venv/bin/python

The release is the newest not newer than that PySpark whose connector and token-provider
modules are both on Maven Central (the registry this machine reaches does not carry every
Spark patch release of both, and the connector's pom asks for the token provider at its own
version). Maven (tests/spark/kafka/pom.xml) copies it with its runtime dependencies; the jars
that PySpark already ships (Hadoop, Scala, slf4j, lz4, snappy, ...) are dropped, so Spark
loads only the connector, kafka-clients and commons-pool2 from ``spark.jars``. Nothing is
done when the directory is complete: after the first fetch this needs no network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = "https://repo1.maven.org/maven2/org/apache/spark"
MODULES = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog" / "spark-kafka"


def releases(module: str) -> set[tuple[int, ...]]:
    with urllib.request.urlopen(f"{REPO}/{module}/maven-metadata.xml", timeout=60) as r:
        text = r.read().decode()
    # releases only: "4.1.0-preview1" and the like are left out
    found = re.findall(r"<version>(\d+\.\d+\.\d+)</version>", text)
    return {tuple(int(x) for x in v.split(".")) for v in found}


def connector_version(pyspark: str) -> str:
    want = tuple(int(x) for x in re.findall(r"\d+", pyspark)[:3])
    both = set.intersection(*(releases(m) for m in MODULES))
    fit = [v for v in both if v[0] == want[0] and v <= want]
    if not fit:
        sys.exit(f"no spark-sql-kafka-0-10 release <= {pyspark} on Maven Central")
    return ".".join(map(str, max(fit)))


def artifact(jar: str) -> str:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[\w.+-]*\.jar$", "", jar)


def main() -> None:
    python = sys.argv[1]
    probe = "import os, pyspark; print(pyspark.__version__, os.path.dirname(pyspark.__file__))"
    version, home = subprocess.check_output([python, "-c", probe], text=True).split()
    out = CACHE / f"pyspark-{version}"
    if (out / ".complete").exists():
        return
    release = connector_version(version)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"pyspark-{version}.", dir=CACHE))
    try:
        subprocess.run(
            ["mvn", "-q", "-B", "-Dstyle.color=never", f"-Dmaven.repo.local={CACHE / 'm2'}",
             f"-Dspark.version={release}", f"-Dspark.kafka.lib.dir={tmp}", "package"],
            cwd=HERE, check=True,
        )  # fmt: skip
        shipped = {artifact(j) for j in os.listdir(Path(home) / "jars")}
        for jar in os.listdir(tmp):
            if artifact(jar) in shipped:
                os.remove(tmp / jar)
        (tmp / ".complete").write_text(f"spark-sql-kafka-0-10 {release} for PySpark {version}\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(HERE / "target", ignore_errors=True)
    print(f"spark-sql-kafka-0-10 {release} for PySpark {version}: {out}")


if __name__ == "__main__":
    main()
