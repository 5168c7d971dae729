"""``pylog dump-log``: print Kafka-format segment files (``.log``, ``.index``,
``.timeindex``, ``.txnindex``, ``.snapshot``) the way Kafka's dump-log-segments
tool does, reading them with the native core. A transaction's COMMIT/ABORT
control record is printed as its marker and coordinator epoch.

Every file is read (``pread``), never memory-mapped: the
tool is run against the segments of a live broker, which may truncate one
while it is read (a follower truncating to its leader, the cleaner, retention),
and a mapping cut under its reader delivers SIGBUS. A file that shrinks
instead ends the dump with an error naming where it now ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import click

from pylog import _native
from pylog.cli.coordinator_record_message_parser import (
    MessageParser,
    offsets_message_parser,
    transaction_log_message_parser,
)
from pylog.errors import CorruptIndexError, CorruptRecordError, KafkaError
from pylog.log.end_transaction_marker import EndTransactionMarker
from pylog.log.producer_state import read_snapshot
from pylog.log.transaction_index import decode_aborted_txns

# Files at least this large get a progress bar on stderr.
PROGRESS_THRESHOLD_BYTES = 64 * 1024 * 1024
BATCHES_PER_CHUNK = 1000

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class DumpFailed(Exception):
    """A file could not be dumped completely; carries the message to print."""


@click.command("dump-log")
@click.option(
    "--files",
    "files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help=(
        "Segment files to dump (.log, .index, .timeindex, .txnindex, .snapshot); "
        "repeat or list several."
    ),
)
@click.argument("more_files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--print-data-log", is_flag=True, help="Print every record, not just batch headers.")
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="For index files: check every entry against the log and print only mismatches.",
)
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="Decompress and validate the records inside compressed batches too.",
)
@click.option(
    "--max-bytes",
    type=int,
    default=2**31 - 1,
    show_default=True,
    help="Largest batch size accepted when validating.",
)
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode the records as __consumer_offsets' (implies --print-data-log).",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="Decode the records as __transaction_state's (implies --print-data-log).",
)
def dump_log(
    files: tuple[str, ...],
    more_files: tuple[str, ...],
    print_data_log: bool,
    verify_index_only: bool,
    deep_iteration: bool,
    max_bytes: int,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
) -> None:
    """Print the contents of Kafka-format segment files.

    Exits non-zero when a file is missing or corrupt; the error names the
    file, the byte position and the reason.
    """
    out = sys.stdout
    failures = 0
    if offsets_decoder and transaction_log_decoder:
        raise click.UsageError("--offsets-decoder and --transaction-log-decoder: one at most")
    # Kafka's kafka-dump-log: a decoder prints every record's key and value
    # as its coordinator's record schema says.
    parser = offsets_message_parser if offsets_decoder else None
    if transaction_log_decoder:
        parser = transaction_log_message_parser
    if parser is not None:
        print_data_log = True
    for path in (*files, *more_files):
        try:
            dump_file(
                path, out, print_data_log, verify_index_only, deep_iteration, max_bytes, parser
            )
        except DumpFailed as e:
            click.echo(f"Error: {e}", err=True)
            failures += 1
        except (OSError, KafkaError) as e:
            click.echo(f"Error: {path}: {e}", err=True)
            failures += 1
    if failures:
        sys.exit(1)


def dump_file(
    path: str,
    out: IO[str],
    print_data_log: bool,
    verify_index_only: bool,
    deep: bool,
    max_bytes: int,
    parser: MessageParser | None = None,
) -> None:
    out.write(f"Dumping {path}\n")
    name = os.path.basename(path)
    stem, _, ext = name.partition(".")
    if ext == "log":
        dump_log_file(path, out, print_data_log, deep, max_bytes, parser)
    elif ext in ("index", "timeindex"):
        base_offset = _base_offset(path, stem)
        log_path = os.path.join(os.path.dirname(path), f"{stem}.log")
        if ext == "index":
            dump_offset_index(path, base_offset, log_path, out, verify_index_only)
        else:
            dump_time_index(path, base_offset, log_path, out, verify_index_only)
    elif ext == "txnindex":
        dump_txn_index(path, out)
    elif ext == "snapshot":
        dump_producer_snapshot(path, out)
    else:
        raise DumpFailed(f"{path}: don't know how to dump a '.{ext}' file")


def dump_txn_index(path: str, out: IO[str]) -> None:
    """The aborted transactions of a ``.txnindex``, one a line (Kafka's format)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = decode_aborted_txns(data, path)
    except CorruptIndexError as e:
        raise DumpFailed(str(e)) from None
    for t in entries:
        out.write(
            f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
            f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}\n"
        )


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def dump_producer_snapshot(path: str, out: IO[str]) -> None:
    """Each producer of a ``.snapshot`` with its open transaction (Kafka's format)."""
    try:
        entries = read_snapshot(path)
    except KafkaError as e:
        raise DumpFailed(f"{path}: {e}") from None
    for entry in entries:
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
            f"lastTimestamp: {entry.last_timestamp} "
        )
        if entry.batches:
            m = entry.batches[0]
            line += (
                f"firstSequence: {m.first_seq} lastSequence: {m.last_seq} "
                f"lastOffset: {m.last_offset} offsetDelta: {m.offset_delta} "
                f"timestamp: {m.timestamp}"
            )
        out.write(line + "\n")


def _base_offset(path: str, stem: str) -> int:
    try:
        return int(stem)
    except ValueError:
        raise DumpFailed(f"{path}: the file name is not a segment's base offset") from None


@contextmanager
def _progress(path: str, total: int) -> Iterator[Any]:
    if total < PROGRESS_THRESHOLD_BYTES:
        yield None
        return
    with click.progressbar(
        length=total, label=os.path.basename(path), file=sys.stderr, show_pos=False
    ) as bar:
        yield bar


def dump_log_file(
    path: str,
    out: IO[str],
    print_data_log: bool,
    deep: bool,
    max_bytes: int,
    parser: MessageParser | None = None,
) -> None:
    size = os.path.getsize(path)
    stem = os.path.basename(path).partition(".")[0]
    if stem.isdigit():
        out.write(f"Log starting offset: {int(stem)}\n")
    position = 0
    with open(path, "rb") as f, _progress(path, size) as bar:
        while position < size:
            infos, next_position = _native.read_batch_infos(path, position, BATCHES_PER_CHUNK)
            end = next_position if infos else size
            # Validate the chunk first so a corrupt batch is named precisely.
            scan = _native.scan_segment(
                path,
                start_position=position,
                end_position=end,
                deep=deep,
                max_batch_size=max_bytes,
            )
            # A live broker may truncate the file meanwhile: the scan (positioned
            # reads, never a mapping) then ends early, and only what it read is shown.
            scanned_to = position + scan.valid_bytes
            for info in infos:
                if info.position >= scanned_to:
                    break
                out.write(_format_batch(info))
                if print_data_log:
                    batch = os.pread(f.fileno(), info.size, info.position)
                    for record in _native.decode_records(batch):
                        out.write(_format_record(info, record, parser))
            if bar is not None:
                bar.update(end - position)
            if scan.error is not None:
                raise DumpFailed(
                    f"{path}: corrupt batch at position {scan.error_position}: {scan.error}"
                )
            if scanned_to < end:
                raise DumpFailed(
                    f"{path}: the file was truncated while being read: it ends at "
                    f"position {scanned_to} now"
                )
            if not infos:
                break
            position = next_position
    out.flush()


def _ts_label(timestamp_type: int) -> str:
    return "LogAppendTime" if timestamp_type == 1 else "CreateTime"


def _horizon(b: _native.BatchInfo) -> str:
    """KIP-534's delete horizon as Kafka's tool prints it (a Java OptionalLong)."""
    return (
        "OptionalLong.empty" if b.delete_horizon_ms < 0 else f"OptionalLong[{b.delete_horizon_ms}]"
    )


def _format_batch(b: _native.BatchInfo) -> str:
    return (
        f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.records_count} "
        f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} "
        f"producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
        f"partitionLeaderEpoch: {b.partition_leader_epoch} "
        f"isTransactional: {str(b.is_transactional).lower()} "
        f"isControl: {str(b.is_control).lower()} deleteHorizonMs: {_horizon(b)} "
        f"position: {b.position} "
        f"{_ts_label(b.timestamp_type)}: {b.max_timestamp} size: {b.size} magic: {b.magic} "
        f"compresscodec: {CODEC_NAMES.get(b.compression, b.compression)} crc: {b.crc} "
        f"isvalid: true\n"
    )


def _payload(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def _format_record(
    b: _native.BatchInfo, r: _native.Record, parser: MessageParser | None = None
) -> str:
    key_size = -1 if r.key is None else len(r.key)
    value_size = -1 if r.value is None else len(r.value)
    header_keys = ",".join(k for k, _ in r.headers)
    line = (
        f"| offset: {r.offset} {_ts_label(b.timestamp_type)}: {r.timestamp} "
        f"keySize: {key_size} valueSize: {value_size} sequence: {r.sequence} "
        f"headerKeys: [{header_keys}]"
    )
    if b.is_control:
        # A control record's key and value are its type and fields, not data.
        try:
            marker = EndTransactionMarker.from_record(r.key, r.value)
        except CorruptRecordError:
            type_id = int.from_bytes(r.key[2:4], "big", signed=True) if r.key else -1
            return line + f" controlType: UNKNOWN({type_id})\n"
        return (
            line + f" endTxnMarker: {marker.type_name} coordinatorEpoch: "
            f"{marker.coordinator_epoch}\n"
        )
    if parser is not None:
        try:
            key, value = parser.parse(r.offset, r.key, r.value)
        except ValueError as e:  # a record without a key: Kafka's tool stops there
            raise DumpFailed(str(e)) from None
        line += f" key: {key}"
        return line + ("" if value is None else f" payload: {value}") + "\n"
    if r.key is not None:
        line += f" key: {_payload(r.key)}"
    return line + f" payload: {_payload(r.value)}\n"


def _batch_at(path: str, position: int) -> _native.BatchInfo | None:
    """The valid batch starting exactly at ``position``, if there is one."""
    infos, _ = _native.read_batch_infos(path, position, 1)
    if not infos or infos[0].position != position:
        return None
    scan = _native.scan_segment(
        path,
        start_position=position,
        end_position=position + infos[0].size,
        max_batch_size=2**31 - 1,
    )
    return infos[0] if scan.error is None and scan.batches == 1 else None


def dump_offset_index(
    path: str, base_offset: int, log_path: str, out: IO[str], verify_only: bool
) -> None:
    has_log = os.path.exists(log_path)
    mismatches: list[str] = []
    for offset, position in _read_index(_native.read_offset_index, path, base_offset):
        if has_log:
            batch = _batch_at(log_path, position)
            if batch is None:
                mismatches.append(
                    f"  Index offset: {offset}, no batch starts at log position {position}"
                )
            elif batch.last_offset < offset or batch.base_offset > offset:
                mismatches.append(f"  Index offset: {offset}, log offset: {batch.last_offset}")
        if not verify_only:
            out.write(f"offset: {offset} position: {position}\n")
    _report_mismatches(path, mismatches, has_log, out)


def dump_time_index(
    path: str, base_offset: int, log_path: str, out: IO[str], verify_only: bool
) -> None:
    has_log = os.path.exists(log_path)
    mismatches: list[str] = []
    for timestamp, offset in _read_index(_native.read_time_index, path, base_offset):
        if has_log:
            found = _native.translate_offset(log_path, offset, 0, os.path.getsize(log_path))
            if found is None:
                mismatches.append(f"  Time index offset: {offset} is not in the log")
            else:
                batch = _batch_at(log_path, found[1])
                if batch is not None and batch.max_timestamp < timestamp:
                    mismatches.append(
                        f"  Index timestamp: {timestamp}, log timestamp: "
                        f"{batch.max_timestamp} (offset {offset})"
                    )
        if not verify_only:
            out.write(f"timestamp: {timestamp} offset: {offset}\n")
    _report_mismatches(path, mismatches, has_log, out)


def _read_index(
    read: Callable[[str, int], list[tuple[int, int]]], path: str, base_offset: int
) -> list[tuple[int, int]]:
    """An index's entries, read (not mapped: the broker may trim the file
    meanwhile) and sanity-checked."""
    try:
        return read(path, base_offset)
    except CorruptIndexError as e:
        raise DumpFailed(f"{path}: {e}") from None


def _report_mismatches(path: str, mismatches: list[str], has_log: bool, out: IO[str]) -> None:
    if not has_log:
        out.write(f"(no {os.path.basename(path).partition('.')[0]}.log beside it: not verified)\n")
        return
    if mismatches:
        out.write(f"Mismatches in {path}:\n" + "\n".join(mismatches) + "\n")
        raise DumpFailed(f"{path}: {len(mismatches)} index entries do not match the log")
