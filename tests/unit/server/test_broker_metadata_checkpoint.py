"""meta.properties: written atomically in Kafka's version-0 form, read back
(KRaft's version-1 node.id too), and log directories that disagree refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pylog.server.broker_metadata_checkpoint import (
    BrokerMetadata,
    InconsistentBrokerMetadataError,
    read_broker_metadata,
    resolve_broker_metadata,
    write_broker_metadata,
)


def test_round_trip_and_kafkas_forms(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert resolve_broker_metadata([a, b]) == BrokerMetadata(None, None)
    write_broker_metadata([a, b], 1001, "r08ysl_HQfiLV695DlI1YA")
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert "version=0\nbroker.id=1001\ncluster.id=r08ysl_HQfiLV695DlI1YA\n" in text
    assert resolve_broker_metadata([a, b]) == BrokerMetadata(1001, "r08ysl_HQfiLV695DlI1YA")
    assert not (tmp_path / "a" / "meta.properties.tmp").exists()
    kraft = tmp_path / "kraft"
    kraft.mkdir()
    (kraft / "meta.properties").write_text(
        "#\n#Mon Nov 23 12:00:00 UTC 2026\nnode.id=4\ndirectory.id=abc\nversion=1\ncluster.id=Xyz\n"
    )
    assert read_broker_metadata(str(kraft)) == BrokerMetadata(4, "Xyz")


def test_directories_that_disagree_are_refused(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    write_broker_metadata([a], 1, "one")
    write_broker_metadata([b], 2, "one")
    with pytest.raises(InconsistentBrokerMetadataError, match="different brokers"):
        resolve_broker_metadata([a, b])
    write_broker_metadata([b], 1, "two")
    with pytest.raises(InconsistentBrokerMetadataError, match="different clusters"):
        resolve_broker_metadata([a, b])
    (tmp_path / "a" / "meta.properties").write_text("broker.id=x\n")
    with pytest.raises(InconsistentBrokerMetadataError, match="not a number"):
        read_broker_metadata(a)
