"""The storage layer: segments, logs and their configuration, in Kafka's on-disk format.

``LogSegment`` is one ``.log`` file with its ``.index`` and ``.timeindex``;
``LocalLog`` is a partition's directory of ordered segments (``LogSegments``)
with its log end offset; ``Log`` (Kafka's UnifiedLog) is the partition's log
over it, with its high watermark and log start offset, trimmed by the rules
of ``retention``; ``LogManager`` owns every log of the broker's ``log.dirs``;
``LogConfig`` is the table of topic keys.
"""

from pylog.errors import UnexpectedAppendOffsetError
from pylog.log.cleaner import LogCleaner
from pylog.log.config import BrokerLogConfig, LogConfig
from pylog.log.fetch import FetchDataInfo
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.log import (
    AppendOrigin,
    FetchIsolation,
    Log,
    LogAppendInfo,
)
from pylog.log.manager import LogManager
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.producer_state import ProducerStateManager
from pylog.log.segment import LogSegment

__all__ = [
    "AppendOrigin",
    "BrokerLogConfig",
    "FetchDataInfo",
    "FetchIsolation",
    "LeaderEpochFileCache",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "ProducerStateManager",
    "UnexpectedAppendOffsetError",
]
