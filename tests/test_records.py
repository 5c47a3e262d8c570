"""Record and part classes compare, hash and print as the dataclasses they are.

``ncclscope.model.records.base.record`` has ``dataclasses`` write only ``__init__`` and defines
equality, the hash and the repr once on the two roots; these tests hold those three to what
``dataclass(eq=True, unsafe_hash=True, repr=True)`` writes, on every record (and every part
inside one) that the real fixture logs give.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from ncclscope.model.records import KINDS
from ncclscope.model.records.base import Part, Record
from ncclscope.parse.parser import parse_text
from ncclscope.parse.transform import type_hints
from tests.helpers import real_logs


def _values(obj: Any) -> tuple[Any, ...]:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


def _dataclass_repr(obj: Any) -> str:
    """What the repr ``dataclasses`` writes gives."""
    inner = ", ".join(f"{f.name}={getattr(obj, f.name)!r}" for f in dataclasses.fields(obj))
    return f"{type(obj).__qualname__}({inner})"


def _nested(obj: Any) -> Iterator[Any]:
    """The object and every record or part inside it, depth first."""
    yield obj
    for value in _values(obj):
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, Part | Record):
                yield from _nested(item)


@pytest.fixture(scope="module")
def fixture_objects() -> list[Any]:
    out: list[Any] = []
    for path in real_logs():
        text = path.read_text(encoding="utf-8", errors="replace")
        for rec in parse_text(text, source=path.name):
            out.extend(_nested(rec))
    return out


def test_every_record_class_is_a_slotted_dataclass_with_the_shared_methods() -> None:
    for cls in KINDS.values():
        assert dataclasses.is_dataclass(cls)
        assert "__slots__" in cls.__dict__
        # only __init__ is written per class; the rest comes from the roots
        for name in ("__eq__", "__hash__", "__repr__"):
            assert name not in cls.__dict__, (cls, name)
        assert cls._field_names == tuple(f.name for f in dataclasses.fields(cls))


def test_fixture_records_compare_hash_and_print_as_dataclasses(fixture_objects: list[Any]) -> None:
    kinds = {type(obj) for obj in fixture_objects}
    assert len(kinds) > 100 and any(issubclass(k, Part) for k in kinds)
    for obj in fixture_objects:
        values = _values(obj)
        assert repr(obj) == _dataclass_repr(obj)
        assert hash(obj) == hash(values)
        twin = dataclasses.replace(obj)
        assert twin == obj
        assert not twin.__ne__(obj)
        assert hash(twin) == hash(obj)
        if isinstance(obj, Record):
            moved = dataclasses.replace(obj, line=obj.line + 1)
            assert moved != obj
            assert obj.__eq__(object()) is NotImplemented


def test_a_part_with_no_field_and_one_with_one() -> None:
    assert Part() == Part() and hash(Part()) == hash(()) and repr(Part()) == "Part()"

    @dataclasses.dataclass
    class _Plain:
        value: int

    from ncclscope.model.records.base import record

    @record
    class _One(Part):
        value: int

    assert _One(value=3) == _One(value=3) != _One(value=4)
    assert hash(_One(value=3)) == hash((3,))
    assert repr(_One(value=3)).endswith("_One(value=3)")
    assert _One(value=3) != _Plain(3)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_type_hints_are_typing_s_for_every_record_and_part_class() -> None:
    """The pipeline reads field types through ``type_hints``, which evaluates each class's own
    annotations once: it must give what ``typing.get_type_hints`` gives."""
    classes = [Record, Part, *_subclasses(Record), *_subclasses(Part)]
    assert len(classes) > 200
    for cls in classes:
        assert type_hints(cls) == typing.get_type_hints(cls), cls.__name__
