"""The ``pylog`` command, one module per command group.

``pylog dump-log`` (:mod:`.dump_log`) prints Kafka-format segment files the way
Kafka's dump-log-segments tool does, reading them with the native core;
``pylog broker start`` (:mod:`.broker`) runs a broker. ``pylog topics``
(:mod:`.topics`), ``produce`` and ``consume`` (:mod:`.console`), ``configs``
(:mod:`.configs`), ``groups`` (:mod:`.groups`), ``cluster`` (:mod:`.cluster`)
``user-scram`` (:mod:`.user_scram`), ``acls`` (:mod:`.acls`) and
``transactions`` (:mod:`.transactions`), and the operator tools
``reassign-partitions`` (:mod:`.reassign_partitions`), ``leader-election``
(:mod:`.leader_election`) and ``log-dirs`` (:mod:`.log_dirs`) are Kafka-protocol clients that work
against any Kafka cluster; what they share is in :mod:`.common`. ``pylog console``
is the web console of :mod:`pylog.console`.
"""

from __future__ import annotations

import click

from pylog.cli.acls import acls
from pylog.cli.broker import broker
from pylog.cli.cluster import cluster
from pylog.cli.configs import configs
from pylog.cli.console import consume, produce
from pylog.cli.dump_log import dump_log
from pylog.cli.groups import groups
from pylog.cli.leader_election import leader_election
from pylog.cli.log_dirs import log_dirs
from pylog.cli.reassign_partitions import reassign_partitions
from pylog.cli.topics import topics
from pylog.cli.transactions import transactions
from pylog.cli.user_scram import user_scram
from pylog.console.command import console as web_console

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pylog-broker")
def main() -> None:
    """pylog: a Kafka-compatible message broker."""


for _command in (
    broker, dump_log, topics, produce, consume, configs, groups, cluster, user_scram, acls,
    transactions, reassign_partitions, leader_election, log_dirs,
    web_console,
):  # fmt: skip
    main.add_command(_command)
