"""The dicts the hot-path handlers answer with (produce_fetch_apis' TypedDicts)
name only fields of the generated response classes they stand for."""

from __future__ import annotations

import pytest

from pylog.broker import produce_fetch_apis as pf
from pylog.protocol._struct import Struct
from pylog.protocol.messages import fetch_response, produce_response

PAIRS: list[tuple[type, type[Struct]]] = [
    (pf.ProduceResponseDict, produce_response.ProduceResponse),
    (pf.TopicProduceResponseDict, produce_response.TopicProduceResponse),
    (pf.PartitionProduceResponseDict, produce_response.PartitionProduceResponse),
    (pf.FetchResponseDict, fetch_response.FetchResponse),
    (pf.FetchableTopicResponseDict, fetch_response.FetchableTopicResponse),
    (pf.PartitionDataDict, fetch_response.PartitionData),
    (pf.EpochEndOffsetDict, fetch_response.EpochEndOffset),
    (pf.LeaderIdAndEpochDict, fetch_response.LeaderIdAndEpoch),
]


@pytest.mark.parametrize("typed_dict, cls", PAIRS, ids=[c.__name__ for _, c in PAIRS])
def test_typed_dict_fields_are_the_class_fields(typed_dict: type, cls: type[Struct]) -> None:
    assert set(typed_dict.__annotations__) <= set(cls._fields)
