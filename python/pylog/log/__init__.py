"""The storage layer: segments, logs and their configuration, in Kafka's on-disk format.

``LogSegment`` is one ``.log`` file with its ``.index`` and ``.timeindex``;
``Log`` is a partition's ordered segments with its log end offset, high
watermark and log start offset; ``LogConfig`` is the table of topic keys.
"""

from pylog.log.config import BrokerLogConfig, LogConfig
from pylog.log.fetch import FetchDataInfo, FileRecords
from pylog.log.log import (
    AppendOrigin,
    FetchIsolation,
    Log,
    LogAppendInfo,
    UnexpectedAppendOffsetError,
)
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.segment import LogSegment

__all__ = [
    "AppendOrigin",
    "BrokerLogConfig",
    "FetchDataInfo",
    "FetchIsolation",
    "FileRecords",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogOffsetMetadata",
    "LogSegment",
    "UnexpectedAppendOffsetError",
]
