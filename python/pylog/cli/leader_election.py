"""``pylog leader-election``: preferred or unclean leader elections over
ElectLeaders (KIP-460), with the options and messages of Kafka's
``kafka-leader-election`` tool (LeaderElectionCommand): one partition
(``--topic`` and ``--partition``), the partitions of a JSON file
(``--path-to-json-file``, ``{"partitions":[{"topic":"foo","partition":1}]}``)
or every partition (``--all-topic-partitions``).

The controller answers every partition named; asked for all of them it
answers only those it elected or failed to, so nothing printed means
nothing needed an election.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import click

from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    error_for_code,
    timeout_option,
)

#: ElectLeaders' election types (KIP-460).
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
ELECTION_NOT_NEEDED = 84


def parse_election_file(path: str) -> dict[str, list[int]]:
    """The partitions of Kafka's election JSON file, by topic."""
    try:
        with open(path, encoding="utf-8") as f:
            doc: Any = json.load(f)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e}") from None
    except ValueError as e:
        raise CommandError(f"The input string is not a valid JSON: {e}") from None
    if not isinstance(doc, dict) or not doc:
        raise CommandError("Replica election data is empty")
    if "partitions" not in doc:
        raise CommandError('Replica election data is missing "partitions" field')
    entries = doc["partitions"]
    if not isinstance(entries, list):
        raise CommandError('Replica election data: "partitions" is not a list')
    found: list[tuple[str, int]] = []
    for i, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
            raise CommandError(
                f'partitions[{i}]: needs a "topic" and a "partition" number: {json.dumps(entry)}'
            )
        found.append((topic, partition))
    dupes = sorted(tp for tp, n in Counter(found).items() if n > 1)
    if dupes:
        raise CommandError(
            "Replica election data contains duplicate partitions: "
            + ",".join(f"{t}-{p}" for t, p in dupes)
        )
    wanted: dict[str, list[int]] = {}
    for t, p in found:
        wanted.setdefault(t, []).append(p)
    return wanted


@click.command("leader-election")
@bootstrap_option
@command_config_option
@timeout_option
@click.option(
    "--election-type",
    type=click.Choice(sorted(ELECTION_TYPES), case_sensitive=False),
    required=True,
    help="PREFERRED: give leadership back to each partition's first replica when it is in "
    "sync; UNCLEAN: elect a leader for partitions without a live one, from outside the ISR "
    "if need be.",
)
@click.option("--topic", default=None, help="The topic of --partition.")
@click.option(
    "--partition", type=click.IntRange(min=0), default=None, help="The partition of --topic."
)
@click.option(
    "--all-topic-partitions", "everything", is_flag=True, help="Every partition of every topic."
)
@click.option(
    "--path-to-json-file",
    type=click.Path(dir_okay=False),
    default=None,
    help='The partitions to elect for: {"partitions":[{"topic":"foo","partition":1}]}.',
)
def leader_election(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    election_type: str,
    topic: str | None,
    partition: int | None,
    everything: bool,
    path_to_json_file: str | None,
) -> None:
    """Elect partition leaders (Kafka's kafka-leader-election.sh)."""
    given = [topic is not None, everything, path_to_json_file is not None]
    if sum(given) != 1:
        raise click.UsageError(
            "One and only one of the following options is required: topic, "
            "all-topic-partitions, path-to-json-file"
        )
    if topic is not None and partition is None:
        raise click.UsageError("Missing required option(s): partition")
    if topic is None and partition is not None:
        raise click.UsageError("Option partition is only allowed if topic is used")
    wanted: dict[str, list[int]] | None = None
    if path_to_json_file is not None:
        wanted = parse_election_file(path_to_json_file)
    elif topic is not None and partition is not None:
        wanted = {topic: [partition]}
    kind = election_type.upper()
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        results = admin.elect_leaders(ELECTION_TYPES[kind], wanted)
    done = [f"{t}-{p}" for t, p, code, _ in sorted(results) if code == 0]
    needless = [f"{t}-{p}" for t, p, code, _ in sorted(results) if code == ELECTION_NOT_NEEDED]
    failed = [
        (f"{t}-{p}", error_for_code(code, message))
        for t, p, code, message in sorted(results, key=lambda r: (r[0], r[1]))
        if code not in (0, ELECTION_NOT_NEEDED)
    ]
    if done:
        click.echo(
            f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}"
        )
    if needless:
        click.echo(f"Valid replica already elected for partitions {', '.join(needless)}")
    for name, why in failed:
        click.echo(f"Error completing leader election ({kind}) for partition: {name}: {why}")
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
