"""The ``pylog`` command, one module per command group.

``pylog dump-log`` (:mod:`.dump_log`) prints Kafka-format segment files the way
Kafka's dump-log-segments tool does, reading them with the native core;
``pylog broker start`` (:mod:`.broker`) runs a broker. ``pylog topics``
(:mod:`.topics`), ``produce`` and ``consume`` (:mod:`.console`), ``configs``
(:mod:`.configs`), ``groups`` (:mod:`.groups`), ``cluster`` (:mod:`.cluster`)
``user-scram`` (:mod:`.user_scram`), ``acls`` (:mod:`.acls`) and
``transactions`` (:mod:`.transactions`), and the operator tools
``reassign-partitions`` (:mod:`.reassign_partitions`), ``leader-election``
(:mod:`.leader_election`) and ``log-dirs`` (:mod:`.log_dirs`) are
Kafka-protocol clients that work against any Kafka cluster; what they share
is in :mod:`.common`. ``pylog console`` is the web console of
:mod:`pylog.console`.
"""

from __future__ import annotations

import importlib

import click

__all__ = ["main"]

# Each command's module, imported only when that command runs (or `--help`
# lists them all): `pylog topics` does not load the broker, and a Spark worker
# importing pylog.cli.client does not load every command.
COMMANDS = {
    "acls": "pylog.cli.acls:acls",
    "broker": "pylog.cli.broker:broker",
    "cluster": "pylog.cli.cluster:cluster",
    "configs": "pylog.cli.configs:configs",
    "console": "pylog.console.command:console",
    "consume": "pylog.cli.console:consume",
    "dump-log": "pylog.cli.dump_log:dump_log",
    "groups": "pylog.cli.groups:groups",
    "leader-election": "pylog.cli.leader_election:leader_election",
    "log-dirs": "pylog.cli.log_dirs:log_dirs",
    "produce": "pylog.cli.console:produce",
    "reassign-partitions": "pylog.cli.reassign_partitions:reassign_partitions",
    "topics": "pylog.cli.topics:topics",
    "transactions": "pylog.cli.transactions:transactions",
    "user-scram": "pylog.cli.user_scram:user_scram",
}


class LazyGroup(click.Group):
    """A group whose commands are named in :data:`COMMANDS` and imported on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, attr = where.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command) and command.name == cmd_name, where
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pylog-broker")
def main() -> None:
    """pylog: a Kafka-compatible message broker."""
