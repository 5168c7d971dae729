"""The source of one message module (``messages/<snake_name>.py``) from its definition.

``pylog.protocol.generator`` calls ``module_source`` for every definition in
``schema/`` and writes the result; the codec imports those modules. A module holds:

- one typed class per struct of the message, named as the JSON names it (the
  message itself, ``TopicProduceData``, ...), with a slot and an annotated
  attribute for every field the struct has in any version;
- per version, ``decode_v<N>(buf, pos) -> (message, end)`` and
  ``encode_v<N>(body, out, chunks) -> out``: straight-line code with the nested
  arrays as inline loops, consecutive fixed-width fields read or written with one
  precompiled ``struct.Struct`` call and no per-field dispatch at run time;
- the same pair again as ``*_tracking``: it notes the field it is working on and
  runs only after the fast one failed, to say which field was malformed;
- ``DECODERS``, ``ENCODERS``, ``TRACKING_DECODERS``, ``TRACKING_ENCODERS`` (by
  version), ``MESSAGE`` (the message's class), ``VALID_VERSIONS`` and
  ``FLEXIBLE_VERSIONS`` (inclusive; 32767 stands for "and every later version").

A version whose code is the same as an earlier one's is that function again
(``decode_v2 = decode_v1``). The output is what ``ruff format`` would write, so
the checked-in modules pass the project's lint unchanged.
"""

from __future__ import annotations

import json
import keyword
import struct
from typing import Any

from ._runtime import MAX_REQUEST_ELEMENTS
from ._spec import FIXED_SIZES, OPEN_END, FieldSpec, MessageSpec, Versions, snake_case

LINE = 100  # the project's line length

_FMT = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}

_PY_TYPES = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "uuid": "str",
    "string": "str",
    "bytes": "bytes",
}


def _in(version: int, versions: Versions) -> bool:
    return version in versions


def _q(text: str) -> str:
    """A double-quoted Python string literal."""
    return json.dumps(text)


def _bytes_lit(data: bytes) -> str:
    return 'b"' + "".join(f"\\x{b:02x}" for b in data) + '"'


def _ident(fmt: str) -> str:
    """A ``struct`` format as part of a name: ``?`` (bool) becomes ``o``."""
    return fmt.replace("?", "o")


def _literal(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return _q(value)
    if isinstance(value, bytes):
        return 'b""' if not value else _bytes_lit(value)
    raise ValueError(f"no literal for {value!r}")


def _versions_text(v: Versions) -> str:
    if not v:
        return "none"
    if v.high == OPEN_END:
        return f"{v.low}+"
    return f"{v.low}" if v.low == v.high else f"{v.low}-{v.high}"


def _optional(f: FieldSpec) -> bool:
    """Whether the attribute can hold None: nullable, defaults to None, or a lone struct."""
    if f.nullable:
        return True
    if f.is_array:
        return f.default is None
    return f.fields is not None or f.default is None


def _elem_type(f: FieldSpec, kind: str) -> str:
    if f.fields is not None:
        return f.type
    if f.type == "records":
        return "memoryview" if kind == "request" else "Records"
    return _PY_TYPES[f.type]


def py_type(f: FieldSpec, kind: str) -> str:
    """The annotation of a field's attribute."""
    t = _elem_type(f, kind)
    if f.is_array:
        t = f"list[{t}]"
    return f"{t} | None" if _optional(f) else t


def _is_fixed(f: FieldSpec, version: int) -> bool:
    return (
        not f.is_array
        and f.fields is None
        and f.type in FIXED_SIZES
        and not _in(version, f.tagged)
        and _in(version, f.versions)
    )


def _differs(val: str, f: FieldSpec) -> str:
    """A condition: the scalar ``val`` is given and is not the field's default."""
    if f.default is None:
        return f"{val} is not None"
    if f.default is False:
        return val
    if f.default is True:
        return f"{val} is not None and not {val}"
    return f"{val} is not None and {val} != {_default_expr(f)}"


def _default_expr(f: FieldSpec) -> str:
    """An expression for a field's default value (a fresh list for arrays)."""
    if f.is_array:
        return "None" if f.default is None else "[]"
    if f.fields is not None:
        return "None"
    return _literal(f.default)


class _Module:
    """What the functions of a module share: its classes and ``struct`` constants."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.kind = "request" if spec.kind == "header" and "Request" in spec.name else spec.kind
        self.runtime: set[str] = set()
        self.formats: dict[str, str] = {}  # constant name -> "unpack_from"/"pack" of fmt
        self.structs: dict[str, list[FieldSpec]] = {}
        self._collect(spec.name, spec.fields)

    def _collect(self, name: str, fields: list[FieldSpec]) -> None:
        seen = self.structs.get(name)
        if seen is not None:
            if [f.name for f in seen] != [f.name for f in fields]:
                raise ValueError(f"{self.spec.name}: two different structs named {name}")
            return
        for f in fields:
            if keyword.iskeyword(f.name):
                raise ValueError(f"{self.spec.name}: field name {f.name!r} is a Python keyword")
        self.structs[name] = fields
        for f in fields:
            if f.fields is not None:
                self._collect(f.type, f.fields)

    def use(self, name: str) -> str:
        self.runtime.add(name)
        return name

    def unpacker(self, fmt: str) -> str:
        name = f"_unpack_{_ident(fmt)}"
        self.formats[name] = f'struct.Struct(">{fmt}").unpack_from'
        return name

    def packer(self, fmt: str) -> str:
        name = f"_pack_{_ident(fmt)}"
        self.formats[name] = f'struct.Struct(">{fmt}").pack'
        return name


class _Fn:
    """The lines of one generated function."""

    def __init__(self, module: _Module, version: int, track: bool) -> None:
        self.m = module
        self.version = version
        self.track = track
        self.flexible = _in(version, module.spec.flexible)
        self.lines: list[str] = []
        self.n = 0

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, indent: int, line: str) -> None:
        # a tracking function's body sits one level deeper, inside its ``try``
        self.lines.append("    " * (indent + self.track) + line)

    def fits(self, indent: int, line: str) -> bool:
        return 4 * (indent + self.track) + len(line) <= LINE

    def call(self, indent: int, head: str, args: list[str], tail: str = ")") -> None:
        """``head`` + args + ``tail``, one argument a line when too long for one line."""
        one = f"{head}{', '.join(args)}{tail}"
        if self.fits(indent, one) or not args:
            self.emit(indent, one)
            return
        self.emit(indent, head)
        for a in args:
            self.emit(indent + 1, f"{a},")
        self.emit(indent, tail)

    def string(self, indent: int, head: str, text: str, fstring: bool = False) -> None:
        """``head`` + a string literal + ``)`` (``head`` ends in ``(``, a call, or is
        ``x = ``), laid out as ``ruff format`` does: on one line, else the string on
        its own line inside the parentheses, else split into implicitly joined parts."""
        prefix = "f" if fstring else ""
        lit = prefix + _q(text)
        call = head.endswith("(")
        tail = ")" if call else ""
        if self.fits(indent, head + lit + tail):
            self.emit(indent, head + lit + tail)
            return
        if call and self.fits(indent + 1, lit):
            self.emit(indent, head)
            self.emit(indent + 1, lit)
            self.emit(indent, ")")
            return
        if fstring:
            raise ValueError(f"f-string too long to lay out: {text}")
        width = LINE - 4 * (indent + 1 + self.track) - 2
        parts = [text[i : i + width] for i in range(0, len(text), width)]
        self.emit(indent, head if call else head + "(")
        for part in parts:
            self.emit(indent + 1, _q(part))
        self.emit(indent, ")")

    def at(self, indent: int, path: str) -> None:
        if self.track:
            self.string(indent, "fld = ", path)

    def compact(self, f: FieldSpec) -> bool:
        if f.flexible is not None:
            return _in(self.version, f.flexible)
        return self.flexible

    def body(self) -> list[str]:
        if not self.track:
            return self.lines
        return [
            '    fld = "(start)"',
            "    try:",
            *self.lines,
            "    except Exception as e:",
            f"        raise {self.m.use('FieldFailure')}(fld, e) from e",
        ]


# --- decoding -------------------------------------------------------------------------


class _Decode(_Fn):
    def build(self) -> list[str]:
        self.emit(1, "blen = len(buf)")
        # a request's arrays share one budget of elements (see MAX_REQUEST_ELEMENTS)
        self.budget = self.m.kind == "request"
        if self.budget:
            self.emit(1, f"left = {MAX_REQUEST_ELEMENTS}")
        res = self.struct(self.m.spec.name, self.m.spec.fields, 1, "")
        self.emit(1, f"return {res}, pos")
        if self.budget and not any("left -=" in line for line in self.lines[2:]):
            del self.lines[1]
        if not any("blen" in line for line in self.lines[1:]):
            del self.lines[0]
        return self.body()

    def uvarint(self, ind: int, target: str) -> None:
        self.emit(ind, f"{target} = buf[pos]")
        self.emit(ind, "pos += 1")
        self.emit(ind, f"if {target} > 127:")
        self.emit(ind + 1, f"{target}, pos = {self.m.use('read_uvarint')}(buf, pos - 1)")

    def length(self, ind: int, f: FieldSpec, target: str, wide: bool) -> None:
        """Read a length (string/bytes: int16 or int32; compact: uvarint - 1) into target."""
        if self.compact(f):
            self.uvarint(ind, target)
            self.emit(ind, f"{target} -= 1")
        else:
            reader = self.m.use("rd32" if wide else "rd16")
            self.emit(ind, f"{target} = {reader}(buf, pos)[0]")
            self.emit(ind, f"pos += {4 if wide else 2}")

    def struct(self, type_name: str, fields: list[FieldSpec], ind: int, path: str) -> str:
        """Emit code decoding a struct; return the variable holding it."""
        v = self.version
        locals_: dict[str, str] = {}
        present = [f for f in fields if _in(v, f.versions) and not _in(v, f.tagged)]
        i = 0
        while i < len(present):
            f = present[i]
            if _is_fixed(f, v):
                run = [f]
                while i + len(run) < len(present) and _is_fixed(present[i + len(run)], v):
                    run.append(present[i + len(run)])
                fmt = "".join(_FMT[r.type] for r in run)
                size = struct.calcsize(">" + fmt)
                names = [self.var("f") for _ in run]
                self.at(ind, path + run[0].name)
                target = f"({names[0]},)" if len(names) == 1 else ", ".join(names)
                self.emit(ind, f"{target} = {self.m.unpacker(fmt)}(buf, pos)")
                self.emit(ind, f"pos += {size}")
                for r, n in zip(run, names, strict=True):
                    if r.type == "uuid":
                        self.emit(ind, f"{n} = {self.m.use('uuid_text')}({n})")
                    locals_[r.name] = n
                i += len(run)
                continue
            locals_[f.name] = self.field(f, ind, path)
            i += 1
        if self.flexible:
            self.tagged(fields, ind, path, locals_)
        args = [locals_[f.name] if f.name in locals_ else _default_expr(f) for f in fields]
        res = self.var("s")
        self.call(ind, f"{res} = {type_name}(", args)
        return res

    def tagged(self, fields: list[FieldSpec], ind: int, path: str, locals_: dict[str, str]) -> None:
        v = self.version
        tagged = sorted(
            (f for f in fields if _in(v, f.tagged) and _in(v, f.versions)),
            key=lambda f: f.tag or 0,
        )
        for f in tagged:
            var = self.var("t")
            self.emit(ind, f"{var}: {py_type(f, self.m.kind)} = {_default_expr(f)}")
            locals_[f.name] = var
        count, tag, size, end = self.var("nt"), self.var("tg"), self.var("tz"), self.var("te")
        self.at(ind, path + "(tagged fields)")
        self.uvarint(ind, count)
        self.emit(ind, f"if {count}:")  # almost always 0: skip building the loop
        ind += 1
        # each tagged field is at least a tag and a size, one byte each
        self.emit(ind, f"if {count} > (blen - pos) // 2:")
        msg = f"{{{count}}} tagged fields are longer than the frame"
        self.string(ind + 1, f"raise {self.m.use('Malformed')}(", msg, fstring=True)
        self.emit(ind, f"for _ in range({count}):")
        self.uvarint(ind + 1, tag)
        self.uvarint(ind + 1, size)
        self.emit(ind + 1, f"{end} = pos + {size}")
        self.emit(ind + 1, f"if {end} > blen:")
        self.string(ind + 2, f"raise {self.m.use('Malformed')}(", "tagged field past the frame end")
        for k, f in enumerate(tagged):
            self.emit(ind + 1, f"{'if' if k == 0 else 'elif'} {tag} == {f.tag}:")
            got = self.field(f, ind + 2, path)
            self.emit(ind + 2, f"{locals_[f.name]} = {got}")
        self.emit(ind + 1, f"pos = {end}")

    def min_size(self, f: FieldSpec, elem: bool = False) -> int:
        """The fewest bytes ``f`` (with ``elem``: one element of the array ``f``) takes
        in this version: a null, an empty string or array, a struct of such fields."""
        compact = self.compact(f)
        if f.is_array and not elem:
            return 1 if compact else 4
        if f.fields is not None:
            if not elem and _in(self.version, f.nullable):
                return 1  # the null marker
            return self.struct_min_size(f.fields)
        if f.type in FIXED_SIZES:
            return FIXED_SIZES[f.type]
        if compact:
            return 1  # a varint length
        return 2 if f.type == "string" else 4

    def struct_min_size(self, fields: list[FieldSpec]) -> int:
        v = self.version
        size = sum(self.min_size(f) for f in fields if _in(v, f.versions) and not _in(v, f.tagged))
        return size + 1 if self.flexible else size  # the count of tagged fields

    def field(self, f: FieldSpec, ind: int, path: str) -> str:
        """Emit code decoding one field; return the variable holding its value."""
        v = self.version
        here = path + f.name
        nullable = _in(v, f.nullable)
        out = self.var("v")
        bad = self.m.use("Malformed")
        self.at(ind, here)
        if f.is_array:
            elem_t = _elem_type(f, self.m.kind)
            n = self.var("n")
            if self.compact(f):
                self.uvarint(ind, n)
                self.emit(ind, f"{n} -= 1")
            else:
                self.emit(ind, f"{n} = {self.m.use('rd32')}(buf, pos)[0]")
                self.emit(ind, "pos += 4")
            if nullable:
                self.emit(ind, f"{out}: list[{elem_t}] | None")
            self.emit(ind, f"if {n} < 0:")
            if nullable:
                self.emit(ind + 1, f"{out} = None")
            else:
                self.string(ind + 1, f"raise {bad}(", "null array for a non-nullable field")
            self.emit(ind, "else:")
            # Every element takes at least `least` bytes of the frame: a count the bytes
            # left cannot hold is refused before anything is allocated or looped over.
            least = max(1, self.min_size(f, elem=True))
            room = "blen - pos" if least == 1 else f"(blen - pos) // {least}"
            self.emit(ind + 1, f"if {n} > {room}:")
            msg = f"array of {{{n}}} elements is longer than the frame"
            self.string(ind + 2, f"raise {bad}(", msg, fstring=True)
            if self.budget:
                self.emit(ind + 1, f"left -= {n}")
                self.emit(ind + 1, "if left < 0:")
                msg = f"more than {MAX_REQUEST_ELEMENTS} array elements in one request"
                self.string(ind + 2, f"raise {bad}(", msg)
            if f.fields is None and f.type in FIXED_SIZES and f.type != "uuid":
                code = _FMT[f.type]
                unpack = self.m.use("unpack_from")
                self.emit(ind + 1, f'{out} = list({unpack}(f">{{{n}}}{code}", buf, pos))')
                self.emit(ind + 1, f"pos += {n} * {FIXED_SIZES[f.type]}")
                return out
            if nullable:
                self.emit(ind + 1, f"{out} = []")
            else:
                self.emit(ind + 1, f"{out}: list[{elem_t}] = []")
            self.emit(ind + 1, f"for _ in range({n}):")
            if f.fields is not None:
                elem = self.struct(f.type, f.fields, ind + 2, here + "[].")
            else:
                elem = self.scalar(f, ind + 2, here + "[]", nullable=False)
            self.emit(ind + 2, f"{out}.append({elem})")
            return out
        if f.fields is not None:
            if nullable:
                self.emit(ind, f"{out}: {f.type} | None")
                self.emit(ind, "if buf[pos] == 255:")
                self.emit(ind + 1, "pos += 1")
                self.emit(ind + 1, f"{out} = None")
                self.emit(ind, "else:")
                self.emit(ind + 1, "pos += 1")
                got = self.struct(f.type, f.fields, ind + 1, here + ".")
                self.emit(ind + 1, f"{out} = {got}")
                return out
            return self.struct(f.type, f.fields, ind, here + ".")
        return self.scalar(f, ind, here, nullable)

    def scalar(self, f: FieldSpec, ind: int, path: str, nullable: bool) -> str:
        out = self.var("v")
        t = f.type
        if t in FIXED_SIZES:
            fmt = _FMT[t]
            self.emit(ind, f"({out},) = {self.m.unpacker(fmt)}(buf, pos)")
            self.emit(ind, f"pos += {struct.calcsize('>' + fmt)}")
            if t == "uuid":
                self.emit(ind, f"{out} = {self.m.use('uuid_text')}({out})")
            return out
        bad = self.m.use("Malformed")
        n, end = self.var("n"), self.var("e")
        self.length(ind, f, n, wide=t != "string")
        if nullable:
            self.emit(ind, f"{out}: {_elem_type(f, self.m.kind)} | None")
        self.emit(ind, f"if {n} < 0:")
        if nullable:
            self.emit(ind + 1, f"{out} = None")
        else:
            self.string(ind + 1, f"raise {bad}(", f"null or negative length for non-nullable {t}")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{end} = pos + {n}")
        self.emit(ind + 1, f"if {end} > blen:")
        msg = f"{t} of {{{n}}} bytes is longer than the frame"
        self.string(ind + 2, f"raise {bad}(", msg, fstring=True)
        if t == "string":
            self.emit(ind + 1, f'{out} = str(buf[pos:{end}], "utf-8")')
        elif t == "bytes":
            self.emit(ind + 1, f"{out} = bytes(buf[pos:{end}])")
        elif t == "records":
            self.emit(ind + 1, f"{out} = buf[pos:{end}]")
        else:
            raise ValueError(f"unknown type {t}")
        self.emit(ind + 1, f"pos = {end}")
        return out


# --- encoding -------------------------------------------------------------------------


class _Encode(_Fn):
    def build(self) -> list[str]:
        self.struct(self.m.spec.fields, "d", "out", 1, "")
        self.emit(1, "return out")
        return self.body()

    def length(self, ind: int, f: FieldSpec, o: str, n: str, wide: bool) -> None:
        if self.compact(f):
            uv, uvb = self.m.use("UV"), self.m.use("uvarint_bytes")
            self.emit(ind, f"{o} += {uv}[{n} + 1] if {n} < 127 else {uvb}({n} + 1)")
        else:
            self.emit(ind, f"{o} += {self.m.use('len32' if wide else 'len16')}({n})")

    def null(self, ind: int, f: FieldSpec, o: str, wide: bool) -> None:
        marker = b"\x00" if self.compact(f) else b"\xff" * (4 if wide else 2)
        self.emit(ind, f"{o} += {_bytes_lit(marker)}")

    def get(self, f: FieldSpec, d: str) -> str:
        if f.is_array:
            default = "None" if f.default is None else "()"
        elif f.fields is not None:
            default = "None"
        else:
            default = _default_expr(f)
        if default == "None":
            return f"{d}.get({_q(f.name)})"
        return f"{d}.get({_q(f.name)}, {default})"

    def struct(self, fields: list[FieldSpec], d: str, o: str, ind: int, path: str) -> None:
        v = self.version
        present = [f for f in fields if _in(v, f.versions) and not _in(v, f.tagged)]
        for f in fields:
            # tagged fields are optional by nature: like ignorable ones, dropped when absent
            if not _in(v, f.versions) and not f.ignorable and not f.tagged:
                self.absent_check(f, d, ind, path)
        i = 0
        while i < len(present):
            f = present[i]
            if _is_fixed(f, v):
                run = [f]
                while i + len(run) < len(present) and _is_fixed(present[i + len(run)], v):
                    run.append(present[i + len(run)])
                fmt = "".join(_FMT[r.type] for r in run)
                args = []
                for r in run:
                    g = self.get(r, d)
                    args.append(f"{self.m.use('uuid_raw')}({g})" if r.type == "uuid" else g)
                self.at(ind, path + run[0].name)
                self.call(ind, f"{o} += {self.m.packer(fmt)}(", args)
                i += len(run)
                continue
            self.field(f, d, o, ind, path)
            i += 1
        if self.flexible:
            self.tagged(fields, d, o, ind, path)

    def absent_check(self, f: FieldSpec, d: str, ind: int, path: str) -> None:
        """A non-ignorable field missing from this version must keep its default."""
        val = self.var("a")
        self.emit(ind, f"{val} = {d}.get({_q(f.name)})")
        cond = val if f.is_array or f.fields is not None else _differs(val, f)
        msg = f"{path}{f.name} is not in version {self.version} and cannot be ignored"
        self.emit(ind, f"if {cond}:")
        self.string(ind + 1, "raise ValueError(", msg)

    def tagged(self, fields: list[FieldSpec], d: str, o: str, ind: int, path: str) -> None:
        v = self.version
        tagged = sorted(
            (f for f in fields if _in(v, f.tagged) and _in(v, f.versions)),
            key=lambda f: f.tag or 0,
        )
        if not tagged:
            self.emit(ind, f'{o} += b"\\x00"')
            return
        uv, uvb = self.m.use("UV"), self.m.use("uvarint_bytes")
        lst = self.var("tl")
        self.emit(ind, f"{lst}: list[tuple[int, bytearray]] | None = None")
        for f in tagged:
            val, tb = self.var("tv"), self.var("tb")
            self.at(ind, path + f.name)
            self.emit(ind, f"{val} = {d}.get({_q(f.name)})")
            if f.is_array or f.fields is not None:
                cond = f"{val}" if (f.is_array and f.default is not None) else f"{val} is not None"
            else:
                cond = _differs(val, f)
            self.emit(ind, f"if {cond}:")
            self.emit(ind + 1, f"{tb} = bytearray()")
            holder = self.var("th")
            self.emit(ind + 1, f"{holder} = {{{_q(f.name)}: {val}}}")
            self.field(f, holder, tb, ind + 1, path)
            self.emit(ind + 1, f"if {lst} is None:")
            self.emit(ind + 2, f"{lst} = []")
            self.emit(ind + 1, f"{lst}.append(({f.tag}, {tb}))")
        self.emit(ind, f"if {lst} is None:")
        self.emit(ind + 1, f'{o} += b"\\x00"')
        self.emit(ind, "else:")
        tag, tb = self.var("tg"), self.var("tb")
        self.emit(ind + 1, f"{o} += {uv}[len({lst})]")
        self.emit(ind + 1, f"for {tag}, {tb} in {lst}:")
        self.emit(ind + 2, f"{o} += {uv}[{tag}] if {tag} < 128 else {uvb}({tag})")
        tz = self.var("tz")
        self.emit(ind + 2, f"{tz} = len({tb})")
        self.emit(ind + 2, f"{o} += {uv}[{tz}] if {tz} < 128 else {uvb}({tz})")
        self.emit(ind + 2, f"{o} += {tb}")

    def field(self, f: FieldSpec, d: str, o: str, ind: int, path: str) -> None:
        v = self.version
        here = path + f.name
        nullable = _in(v, f.nullable)
        val = self.var("v")
        self.at(ind, here)
        self.emit(ind, f"{val} = {self.get(f, d)}")
        if f.is_array:
            self.emit(ind, f"if {val} is None:")
            if nullable:
                self.null(ind + 1, f, o, wide=True)
            else:
                self.emit(ind + 1, f"{o} += {_bytes_lit(self.count_bytes(f, 0))}")
            self.emit(ind, "else:")
            n = self.var("n")
            self.emit(ind + 1, f"{n} = len({val})")
            self.length(ind + 1, f, o, n, wide=True)
            if f.fields is None and f.type in FIXED_SIZES and f.type != "uuid":
                pack = self.m.use("pack")
                self.emit(ind + 1, f'{o} += {pack}(f">{{{n}}}{_FMT[f.type]}", *{val})')
                return
            e = self.var("x")
            self.emit(ind + 1, f"for {e} in {val}:")
            if f.fields is not None:
                self.struct(f.fields, e, o, ind + 2, here + "[].")
            else:
                self.scalar_value(f, e, o, ind + 2, nullable=False)
            return
        if f.fields is not None:
            if nullable:
                self.emit(ind, f"if {val} is None:")
                self.emit(ind + 1, f'{o} += b"\\xff"')
                self.emit(ind, "else:")
                self.emit(ind + 1, f'{o} += b"\\x01"')
                self.struct(f.fields, val, o, ind + 1, here + ".")
            else:
                self.emit(ind, f"if {val} is None:")
                self.emit(ind + 1, f"{val} = {{}}")
                self.struct(f.fields, val, o, ind, here + ".")
            return
        self.scalar_value(f, val, o, ind, nullable)

    def count_bytes(self, f: FieldSpec, n: int) -> bytes:
        if self.compact(f):
            return bytes([n + 1])
        return struct.pack(">i", n)

    def scalar_value(self, f: FieldSpec, val: str, o: str, ind: int, nullable: bool) -> None:
        t = f.type
        if t in FIXED_SIZES:
            arg = f"{self.m.use('uuid_raw')}({val})" if t == "uuid" else val
            self.emit(ind, f"{o} += {self.m.packer(_FMT[t])}({arg})")
            return
        wide = t != "string"
        if nullable:
            self.emit(ind, f"if {val} is None:")
            self.null(ind + 1, f, o, wide)
            self.emit(ind, "else:")
            ind += 1
        n = self.var("n")
        if t == "string":
            b = self.var("b")
            self.emit(ind, f"{b} = {val}.encode()")
            self.emit(ind, f"{n} = len({b})")
            self.length(ind, f, o, n, wide)
            self.emit(ind, f"{o} += {b}")
        elif t == "bytes":
            self.emit(ind, f"{n} = {self.m.use('records_size')}({val})")
            self.length(ind, f, o, n, wide)
            self.emit(ind, f"{o} += {val}")
        elif t == "records":
            self.emit(ind, f"{n} = {self.m.use('records_size')}({val})")
            self.length(ind, f, o, n, wide)
            self.emit(ind, f"if {n}:")
            self.emit(ind + 1, f"chunks.append({o})")
            self.emit(ind + 1, f"chunks.append({val})")
            self.emit(ind + 1, f"{o} = bytearray()")
        else:
            raise ValueError(f"unknown type {t}")


# --- the module -----------------------------------------------------------------------


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's isort gives imported names: CONSTANTS, Classes, functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def module_name(spec: MessageSpec) -> str:
    """``ProduceRequest`` -> ``produce_request``."""
    return snake_case(spec.name)


def _class_source(m: _Module, name: str, fields: list[FieldSpec]) -> list[str]:
    spec = m.spec
    if name == spec.name:
        what = {"request": "request", "response": "response", "header": "header"}[spec.kind]
        key = "" if spec.api_key is None else f" (api key {spec.api_key})"
        doc = f"{name}{key}: the {what} as decoded, versions {_versions_text(spec.valid)}."
    else:
        doc = f"A {name} of {spec.name}."
    lines = [f"class {name}(Struct):", f'    """{doc}"""', ""]
    lines.extend(_tuple("_fields", [f.name for f in fields]))
    lines.append("    __slots__ = _fields")
    if not fields:
        return lines
    lines.append("")
    for f in fields:
        note = f"versions {_versions_text(f.versions)}"
        if f.tagged:
            note += f", tagged {_versions_text(f.tagged)} (tag {f.tag})"
        if f.nullable:
            note += f", nullable {_versions_text(f.nullable)}"
        lines.append(f"    {f.name}: {py_type(f, m.kind)}  # {note}")
    lines.append("")
    params = []
    assigns = []
    for f in fields:
        t = py_type(f, m.kind)
        if f.is_array and f.default is not None:
            # each instance gets its own empty list
            params.append(f"{f.name}: {t} = {m.use('EMPTY')}")
            value = f"[] if {f.name} is EMPTY else {f.name}"
            if len(f"        self.{f.name} = {value}") <= LINE:
                assigns.append(f"self.{f.name} = {value}")
            else:  # wrapped as ruff format wraps it
                assigns.append(f"self.{f.name} = (\n            {value}\n        )")
        else:
            default = "None" if f.is_array else _default_expr(f)
            params.append(f"{f.name}: {t} = {default}")
            assigns.append(f"self.{f.name} = {f.name}")
    one = f"    def __init__(self, {', '.join(params)}) -> None:"
    if len(one) <= LINE:
        lines.append(one)
    else:
        lines.append("    def __init__(")
        lines.append("        self,")
        lines.extend(f"        {p}," for p in params)
        lines.append("    ) -> None:")
    lines.extend(f"        {a}" for a in assigns)
    return lines


def _tuple(name: str, items: list[str]) -> list[str]:
    names = [_q(n) for n in items]
    one = f"    {name} = (" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    if len(one) <= LINE:
        return [one]
    return [f"    {name} = (", *[f"        {n}," for n in names], "    )"]


def _table(name: str, annotation: str, entries: dict[int, str]) -> list[str]:
    lines = [f"{name}: {annotation} = {{"]
    lines.extend(f"    {v}: {fn}," for v, fn in entries.items())
    lines.append("}")
    return lines


def module_source(spec: MessageSpec, file_name: str) -> str:
    """The whole module of one message definition."""
    m = _Module(spec)
    name = spec.name
    functions: list[list[str]] = []
    tables: dict[str, dict[int, str]] = {
        "DECODERS": {},
        "TRACKING_DECODERS": {},
        "ENCODERS": {},
        "TRACKING_ENCODERS": {},
    }
    dec_params = ["buf: memoryview", "pos: int"]
    enc_params = [f"d: {name} | Mapping[str, Any]", "out: bytearray", "chunks: list[Chunk]"]
    for table, gen_cls, track, params, returns in (
        ("DECODERS", _Decode, False, dec_params, f"tuple[{name}, int]"),
        ("TRACKING_DECODERS", _Decode, True, dec_params, f"tuple[{name}, int]"),
        ("ENCODERS", _Encode, False, enc_params, "bytearray"),
        ("TRACKING_ENCODERS", _Encode, True, enc_params, "bytearray"),
    ):
        stem = "decode" if gen_cls is _Decode else "encode"
        suffix = "_tracking" if track else ""
        seen: dict[tuple[str, ...], str] = {}
        for v in range(spec.valid.low, spec.valid.high + 1):
            fn_name = f"{stem}_v{v}{suffix}"
            body = tuple(gen_cls(m, v, track).build())
            same = seen.get(body)
            if same is not None:
                functions.append([f"{fn_name} = {same}"])
            else:
                seen[body] = fn_name
                sig = f"def {fn_name}({', '.join(params)}) -> {returns}:"
                if len(sig) > LINE:
                    head = [f"def {fn_name}(", *[f"    {p}," for p in params], f") -> {returns}:"]
                else:
                    head = [sig]
                functions.append([*head, *body])
            tables[table][v] = fn_name
    m.use("Chunk")
    m.use("Decoder")
    m.use("Encoder")
    classes: list[str] = []
    for cls_name, fields in m.structs.items():
        classes.extend(["", "", *_class_source(m, cls_name, fields)])

    out: list[str] = [
        "# Generated by `python -m pylog.protocol.generator` (`make protocol`) from",
        f"# pylog/protocol/schema/{file_name}: do not edit, regenerate.",
        f'"""{name}: its classes and its decoders and encoders per version."""',
        "",
        "from __future__ import annotations",
        "",
    ]
    if m.formats:
        out.append("import struct")
    out.append("from collections.abc import Mapping")
    out.append("from typing import Any")
    out.append("")
    if m.kind != "request" and any(
        f.type == "records" for fields in m.structs.values() for f in fields
    ):
        m.use("Records")
    names = sorted(m.runtime, key=_isort_key)
    one = f"from pylog.protocol._runtime import {', '.join(names)}"
    if len(one) <= LINE:
        out.append(one)
    else:
        out.append("from pylog.protocol._runtime import (")
        out.extend(f"    {n}," for n in names)
        out.append(")")
    out.append("from pylog.protocol._struct import Struct")
    if m.formats:
        out.append("")
        for const, expr in sorted(m.formats.items()):
            out.append(f"{const} = {expr}")
    out.extend(classes)
    for fn in functions:
        out.extend(["", "", *fn])
    out.extend(["", ""])
    out.append(f"MESSAGE = {name}")
    out.append(f"VALID_VERSIONS = ({spec.valid.low}, {spec.valid.high})")
    out.append(f"FLEXIBLE_VERSIONS = ({spec.flexible.low}, {spec.flexible.high})")
    out.append("")
    out.extend(_table("DECODERS", "dict[int, Decoder]", tables["DECODERS"]))
    out.extend(_table("TRACKING_DECODERS", "dict[int, Decoder]", tables["TRACKING_DECODERS"]))
    out.extend(_table("ENCODERS", "dict[int, Encoder]", tables["ENCODERS"]))
    out.extend(_table("TRACKING_ENCODERS", "dict[int, Encoder]", tables["TRACKING_ENCODERS"]))
    return "\n".join(out) + "\n"
