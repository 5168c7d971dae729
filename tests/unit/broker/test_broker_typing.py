"""The dicts some handlers answer with (``pylog.broker.response_dicts``) name
only fields of the generated response classes they stand for, with the same
value types."""

from __future__ import annotations

import typing
from types import ModuleType

import pytest

from pylog.broker import response_dicts
from pylog.protocol import Struct
from pylog.protocol.messages import (
    create_partitions_response,
    create_topics_response,
    delete_records_response,
    delete_topics_response,
    describe_cluster_response,
    describe_log_dirs_response,
    fetch_response,
    metadata_response,
    produce_response,
)

MODULES: list[ModuleType] = [
    produce_response,
    fetch_response,
    create_topics_response,
    delete_topics_response,
    create_partitions_response,
    delete_records_response,
    metadata_response,
    describe_cluster_response,
    describe_log_dirs_response,
]


def _typed_dicts() -> list[tuple[str, type]]:
    return [
        (name, obj)
        for name, obj in vars(response_dicts).items()
        if isinstance(obj, type) and typing.is_typeddict(obj)
    ]


def _stands_for(dict_name: str) -> type[Struct]:
    """The class a TypedDict stands for: the one module of MODULES that has it
    (a name two messages share, like EpochEndOffset, is taken from the first)."""
    name = dict_name.removesuffix("Dict")
    for module in MODULES:
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, Struct):
            return cls
    raise AssertionError(f"{dict_name}: no class {name} in {[m.__name__ for m in MODULES]}")


def _text(annotation: object) -> str:
    """An annotation as written (both modules postpone their annotations), with
    the Dict suffix of nested TypedDicts dropped."""
    text = annotation.__forward_arg__ if isinstance(annotation, typing.ForwardRef) else annotation
    assert isinstance(text, str)
    return text.replace("Dict", "")


@pytest.mark.parametrize("name, typed_dict", _typed_dicts(), ids=[n for n, _ in _typed_dicts()])
def test_typed_dict_fields_are_the_class_fields(name: str, typed_dict: type) -> None:
    cls = _stands_for(name)
    keys = typed_dict.__annotations__
    assert set(keys) <= set(cls._fields)
    for key, annotation in keys.items():
        assert _text(annotation) == _text(cls.__annotations__[key]), key


def test_every_typed_dict_is_checked() -> None:
    assert len(_typed_dicts()) >= 20
