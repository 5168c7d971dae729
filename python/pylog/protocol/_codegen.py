"""Specialised Python source per (message, version), compiled on first use.

For each message version the generator writes one straight-line function with
the nested arrays as inline loops, consecutive fixed-width fields read or written
with one precompiled ``struct.Struct`` call, and no per-field dispatch at run time.

    decode(buf: memoryview, pos: int) -> (Struct, end)
    encode(body: Mapping, out: bytearray, chunks: list) -> bytearray

The encoder appends to ``out``; a records field ends the current ``bytearray``
(appended to ``chunks``), adds the caller's records object as its own chunk and
continues in a fresh ``bytearray``, which it returns.

Each function exists twice: a fast one, and a *tracking* one that notes the field
it is working on. The tracking one runs only after the fast one failed, to say
which field was malformed.
"""

from __future__ import annotations

import base64
import keyword
import struct
import uuid as _uuid
from collections.abc import Callable
from typing import Any, cast

from pylog.errors import UnsupportedVersionError

from ._spec import FIXED_SIZES, FieldSpec, MessageSpec
from ._struct import Struct, make_struct_class

Decoder = Callable[[memoryview, int], "tuple[Any, int]"]
Encoder = Callable[[Any, bytearray, list[Any]], bytearray]

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


class Malformed(ValueError):
    """Raised by generated decoders for bytes that break the schema."""


class FieldFailure(Exception):
    """A failure inside a tracking function, with the field path it happened at."""

    def __init__(self, path: str, cause: BaseException) -> None:
        super().__init__(path, cause)
        self.path = path
        self.cause = cause


# --- helpers the generated code calls -------------------------------------------------


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes, 32 bits) at ``pos``."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise Malformed("unsigned varint longer than 5 bytes")


def uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"negative length {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


UV = [bytes([i]) for i in range(128)]


def uuid_text(raw: bytes) -> str:
    """16 bytes -> Kafka's text form of a Uuid (base64url, no padding)."""
    return base64.urlsafe_b64encode(raw)[:22].decode("ascii")


def uuid_raw(value: Any) -> bytes:
    """A Uuid given as Kafka text, ``uuid.UUID``, 16 bytes or ``None`` (zero) -> 16 bytes."""
    if value is None:
        return bytes(16)
    if isinstance(value, str):
        if len(value) == 22:
            raw = base64.urlsafe_b64decode(value + "==")
        else:
            raw = _uuid.UUID(value).bytes
    elif isinstance(value, _uuid.UUID):
        raw = value.bytes
    else:
        raw = bytes(value)
    if len(raw) != 16:
        raise ValueError(f"a uuid is 16 bytes, not {len(raw)}")
    return raw


def records_size(value: Any) -> int:
    t = type(value)
    if t is bytes or t is bytearray:
        return len(value)
    if t is memoryview:
        return int(value.nbytes)
    size = getattr(value, "size", None)
    if isinstance(size, int):
        return size
    return len(memoryview(value).cast("B"))


def _bad(message: str) -> Malformed:
    return Malformed(message)


_BASE_NS: dict[str, Any] = {
    "_uv": read_uvarint,
    "_uvb": uvarint_bytes,
    "_UV": UV,
    "_uuid_text": uuid_text,
    "_uuid_raw": uuid_raw,
    "_rsize": records_size,
    "_bad": _bad,
    "_Failure": FieldFailure,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_rd16": struct.Struct(">h").unpack_from,
    "_rd32": struct.Struct(">i").unpack_from,
    "_len16": struct.Struct(">h").pack,
    "_len32": struct.Struct(">i").pack,
}


class _Writer:
    def __init__(self, track: bool) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = dict(_BASE_NS)
        self.n = 0
        self.track = track
        self._structs: dict[str, str] = {}

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, value: Any, prefix: str = "_k") -> str:
        name = self.var(prefix)
        self.ns[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def at(self, indent: int, path: str) -> None:
        if self.track:
            self.emit(indent, f"_fld = {path!r}")

    def unpacker(self, fmt: str) -> str:
        key = "U" + fmt
        if key not in self._structs:
            self._structs[key] = self.const(struct.Struct(">" + fmt).unpack_from, "_u")
        return self._structs[key]

    def packer(self, fmt: str) -> str:
        key = "P" + fmt
        if key not in self._structs:
            self._structs[key] = self.const(struct.Struct(">" + fmt).pack, "_p")
        return self._structs[key]

    def compile(self, fname: str, params: str, filename: str) -> Any:
        body = self.lines
        if self.track:
            body = [
                "    _fld = '(start)'",
                "    try:",
                *["    " + line for line in self.lines],
                "    except Exception as _e:",
                "        raise _Failure(_fld, _e) from _e",
            ]
        source = f"def {fname}({params}):\n" + "\n".join(body) + "\n"
        code = compile(source, filename, "exec")
        exec(code, self.ns)  # generated from the schema
        fn = self.ns[fname]
        fn.__source__ = source
        return fn


def _in(version: int, versions: Any) -> bool:
    return bool(version in versions)


class _Message:
    """Per-message state shared by all versions: the Struct classes."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.classes: dict[str, type[Struct]] = {}

    def struct_class(self, type_name: str, fields: list[FieldSpec]) -> type[Struct]:
        cls = self.classes.get(type_name)
        if cls is None:
            names = tuple(f.name for f in fields)
            for n in names:
                if keyword.iskeyword(n):
                    raise ValueError(f"field name {n!r} is a Python keyword")
            qual = (
                self.spec.name if type_name == self.spec.name else f"{self.spec.name}.{type_name}"
            )
            cls = make_struct_class(qual, names)
            self.classes[type_name] = cls
        return cls


def _is_fixed(f: FieldSpec, version: int) -> bool:
    return (
        not f.is_array
        and f.fields is None
        and f.type in FIXED_SIZES
        and not _in(version, f.tagged)
        and _in(version, f.versions)
    )


def _default_expr(w: _Writer, f: FieldSpec) -> str:
    """An expression for a field's default value (a fresh list for arrays)."""
    if f.is_array:
        return "None" if f.default is None else "[]"
    if f.fields is not None:
        return "None"
    if f.default is None or isinstance(f.default, (bool, int, float)):
        return repr(f.default)
    return w.const(f.default)


# --- decoding -------------------------------------------------------------------------


class _DecodeGen:
    def __init__(self, msg: _Message, version: int, track: bool) -> None:
        self.msg = msg
        self.version = version
        self.flexible = _in(version, msg.spec.flexible)
        self.w = _Writer(track)

    def build(self) -> Decoder:
        w = self.w
        w.emit(1, "blen = len(buf)")
        res = self.struct(self.msg.spec.name, self.msg.spec.fields, 1, "")
        w.emit(1, f"return {res}, pos")
        fn: Decoder = w.compile(
            "decode", "buf, pos", f"<pylog.protocol {self.msg.spec.name} v{self.version} decode>"
        )
        return fn

    def compact(self, f: FieldSpec) -> bool:
        if f.flexible is not None:
            return _in(self.version, f.flexible)
        return self.flexible

    def uvarint(self, ind: int, target: str) -> None:
        w = self.w
        w.emit(ind, f"{target} = buf[pos]")
        w.emit(ind, "pos += 1")
        w.emit(ind, f"if {target} > 127:")
        w.emit(ind + 1, f"{target}, pos = _uv(buf, pos - 1)")

    def length(self, ind: int, f: FieldSpec, target: str, wide: bool) -> None:
        """Read a length (string/bytes: int16 or int32; compact: uvarint - 1) into target."""
        w = self.w
        if self.compact(f):
            self.uvarint(ind, target)
            w.emit(ind, f"{target} -= 1")
        else:
            w.emit(ind, f"{target} = {'_rd32' if wide else '_rd16'}(buf, pos)[0]")
            w.emit(ind, f"pos += {4 if wide else 2}")

    def struct(self, type_name: str, fields: list[FieldSpec], ind: int, path: str) -> str:
        """Emit code decoding a struct; return the variable holding it."""
        w = self.w
        v = self.version
        cls = self.msg.struct_class(type_name, fields)
        cname = w.const(cls, "_C")
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
                names = [w.var("f") for _ in run]
                w.at(ind, path + run[0].name)
                w.emit(ind, f"{', '.join(names)}, = {w.unpacker(fmt)}(buf, pos)")
                w.emit(ind, f"pos += {size}")
                for r, n in zip(run, names, strict=True):
                    if r.type == "uuid":
                        w.emit(ind, f"{n} = _uuid_text({n})")
                    locals_[r.name] = n
                i += len(run)
                continue
            locals_[f.name] = self.field(f, ind, path)
            i += 1
        if self.flexible:
            self.tagged(fields, ind, path, locals_)
        args = []
        for f in fields:
            args.append(locals_[f.name] if f.name in locals_ else _default_expr(w, f))
        res = w.var("s")
        w.emit(ind, f"{res} = {cname}({', '.join(args)})")
        return res

    def tagged(self, fields: list[FieldSpec], ind: int, path: str, locals_: dict[str, str]) -> None:
        w = self.w
        v = self.version
        tagged = sorted(
            (f for f in fields if _in(v, f.tagged) and _in(v, f.versions)),
            key=lambda f: f.tag or 0,
        )
        for f in tagged:
            var = w.var("t")
            w.emit(ind, f"{var} = {_default_expr(w, f)}")
            locals_[f.name] = var
        count, tag, size, end = w.var("nt"), w.var("tg"), w.var("tz"), w.var("te")
        w.at(ind, path + "(tagged fields)")
        self.uvarint(ind, count)
        w.emit(ind, f"if {count}:")  # almost always 0: skip building the loop
        ind += 1
        w.emit(ind, f"for _ in range({count}):")
        self.uvarint(ind + 1, tag)
        self.uvarint(ind + 1, size)
        w.emit(ind + 1, f"{end} = pos + {size}")
        w.emit(ind + 1, f"if {end} > blen:")
        w.emit(ind + 2, "raise _bad('tagged field past the end of the frame')")
        for k, f in enumerate(tagged):
            w.emit(ind + 1, f"{'if' if k == 0 else 'elif'} {tag} == {f.tag}:")
            got = self.field(f, ind + 2, path)
            w.emit(ind + 2, f"{locals_[f.name]} = {got}")
        w.emit(ind + 1, f"pos = {end}")

    def field(self, f: FieldSpec, ind: int, path: str) -> str:
        """Emit code decoding one field; return the variable holding its value."""
        w = self.w
        v = self.version
        here = path + f.name
        nullable = _in(v, f.nullable)
        out = w.var("v")
        w.at(ind, here)
        if f.is_array:
            n = w.var("n")
            if self.compact(f):
                self.uvarint(ind, n)
                w.emit(ind, f"{n} -= 1")
            else:
                w.emit(ind, f"{n} = _rd32(buf, pos)[0]")
                w.emit(ind, "pos += 4")
            w.emit(ind, f"if {n} < 0:")
            if nullable:
                w.emit(ind + 1, f"{out} = None")
            else:
                w.emit(ind + 1, "raise _bad('null array for a non-nullable field')")
            w.emit(ind, "else:")
            w.emit(ind + 1, f"if {n} > blen - pos:")
            w.emit(ind + 2, "raise _bad(f'array of {" + n + "} elements is longer than the frame')")
            if f.fields is None and f.type in FIXED_SIZES and f.type != "uuid":
                code = _FMT[f.type]
                w.emit(ind + 1, f"{out} = list(_unpack_from(f'>{{{n}}}{code}', buf, pos))")
                w.emit(ind + 1, f"pos += {n} * {FIXED_SIZES[f.type]}")
                return out
            w.emit(ind + 1, f"{out} = []")
            w.emit(ind + 1, f"for _ in range({n}):")
            if f.fields is not None:
                elem = self.struct(f.type, f.fields, ind + 2, here + "[].")
            else:
                elem = self.scalar(f, ind + 2, here + "[]", nullable=False)
            w.emit(ind + 2, f"{out}.append({elem})")
            return out
        if f.fields is not None:
            if nullable:
                w.emit(ind, "if buf[pos] == 255:")
                w.emit(ind + 1, "pos += 1")
                w.emit(ind + 1, f"{out} = None")
                w.emit(ind, "else:")
                w.emit(ind + 1, "pos += 1")
                got = self.struct(f.type, f.fields, ind + 1, here + ".")
                w.emit(ind + 1, f"{out} = {got}")
                return out
            return self.struct(f.type, f.fields, ind, here + ".")
        return self.scalar(f, ind, here, nullable)

    def scalar(self, f: FieldSpec, ind: int, path: str, nullable: bool) -> str:
        w = self.w
        out = w.var("v")
        t = f.type
        if t in FIXED_SIZES:
            fmt = _FMT[t]
            w.emit(ind, f"{out}, = {w.unpacker(fmt)}(buf, pos)")
            w.emit(ind, f"pos += {struct.calcsize('>' + fmt)}")
            if t == "uuid":
                w.emit(ind, f"{out} = _uuid_text({out})")
            return out
        n, end = w.var("n"), w.var("e")
        self.length(ind, f, n, wide=t != "string")
        w.emit(ind, f"if {n} < 0:")
        if nullable:
            w.emit(ind + 1, f"{out} = None")
        else:
            w.emit(ind + 1, f"raise _bad('null or negative length for non-nullable {t}')")
        w.emit(ind, "else:")
        w.emit(ind + 1, f"{end} = pos + {n}")
        w.emit(ind + 1, f"if {end} > blen:")
        w.emit(ind + 2, f"raise _bad(f'{t} of {{{n}}} bytes is longer than the frame')")
        if t == "string":
            w.emit(ind + 1, f"{out} = str(buf[pos:{end}], 'utf-8')")
        elif t == "bytes":
            w.emit(ind + 1, f"{out} = bytes(buf[pos:{end}])")
        elif t == "records":
            w.emit(ind + 1, f"{out} = buf[pos:{end}]")
        else:
            raise ValueError(f"unknown type {t}")
        w.emit(ind + 1, f"pos = {end}")
        return out


# --- encoding -------------------------------------------------------------------------


class _EncodeGen:
    def __init__(self, msg: _Message, version: int, track: bool) -> None:
        self.msg = msg
        self.version = version
        self.flexible = _in(version, msg.spec.flexible)
        self.w = _Writer(track)

    def build(self) -> Encoder:
        w = self.w
        self.struct(self.msg.spec.fields, "d", "out", 1, "")
        w.emit(1, "return out")
        fn: Encoder = w.compile(
            "encode",
            "d, out, chunks",
            f"<pylog.protocol {self.msg.spec.name} v{self.version} encode>",
        )
        return fn

    def compact(self, f: FieldSpec) -> bool:
        if f.flexible is not None:
            return _in(self.version, f.flexible)
        return self.flexible

    def length(self, ind: int, f: FieldSpec, o: str, n: str, wide: bool) -> None:
        w = self.w
        if self.compact(f):
            w.emit(ind, f"{o} += _UV[{n} + 1] if {n} < 127 else _uvb({n} + 1)")
        else:
            w.emit(ind, f"{o} += {'_len32' if wide else '_len16'}({n})")

    def null(self, ind: int, f: FieldSpec, o: str, wide: bool) -> None:
        marker = b"\x00" if self.compact(f) else b"\xff" * (4 if wide else 2)
        self.w.emit(ind, f"{o} += {marker!r}")

    def get(self, f: FieldSpec, d: str) -> str:
        w = self.w
        if f.is_array:
            default = "None" if f.default is None else w.const((), "_E")
        elif f.fields is not None:
            default = "None"
        else:
            default = _default_expr(w, f)
        return f"{d}.get({f.name!r}, {default})"

    def struct(self, fields: list[FieldSpec], d: str, o: str, ind: int, path: str) -> None:
        w = self.w
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
                    args.append(f"_uuid_raw({g})" if r.type == "uuid" else g)
                w.at(ind, path + run[0].name)
                w.emit(ind, f"{o} += {w.packer(fmt)}({', '.join(args)})")
                i += len(run)
                continue
            self.field(f, d, o, ind, path)
            i += 1
        if self.flexible:
            self.tagged(fields, d, o, ind, path)

    def absent_check(self, f: FieldSpec, d: str, ind: int, path: str) -> None:
        """A non-ignorable field missing from this version must keep its default."""
        w = self.w
        val = w.var("a")
        w.emit(ind, f"{val} = {d}.get({f.name!r})")
        if f.is_array or f.fields is not None:
            cond = f"{val}"
        else:
            cond = f"{val} is not None and {val} != {_default_expr(w, f)}"
        msg = f"{path}{f.name} is not in version {self.version} and cannot be ignored"
        w.emit(ind, f"if {cond}:")
        w.emit(ind + 1, f"raise ValueError({msg!r})")

    def tagged(self, fields: list[FieldSpec], d: str, o: str, ind: int, path: str) -> None:
        w = self.w
        v = self.version
        tagged = sorted(
            (f for f in fields if _in(v, f.tagged) and _in(v, f.versions)),
            key=lambda f: f.tag or 0,
        )
        if not tagged:
            w.emit(ind, f"{o} += b'\\x00'")
            return
        lst = w.var("tl")
        w.emit(ind, f"{lst} = None")
        for f in tagged:
            val, tb = w.var("tv"), w.var("tb")
            w.at(ind, path + f.name)
            w.emit(ind, f"{val} = {d}.get({f.name!r})")
            if f.is_array or f.fields is not None:
                cond = f"{val}" if (f.is_array and f.default is not None) else f"{val} is not None"
            else:
                cond = f"{val} is not None and {val} != {_default_expr(w, f)}"
            w.emit(ind, f"if {cond}:")
            w.emit(ind + 1, f"{tb} = bytearray()")
            holder = w.var("th")
            w.emit(ind + 1, f"{holder} = {{{f.name!r}: {val}}}")
            self.field(f, holder, tb, ind + 1, path)
            w.emit(ind + 1, f"if {lst} is None:")
            w.emit(ind + 2, f"{lst} = []")
            w.emit(ind + 1, f"{lst}.append(({f.tag}, {tb}))")
        w.emit(ind, f"if {lst} is None:")
        w.emit(ind + 1, f"{o} += b'\\x00'")
        w.emit(ind, "else:")
        tag, tb = w.var("tg"), w.var("tb")
        w.emit(ind + 1, f"{o} += _UV[len({lst})]")
        w.emit(ind + 1, f"for {tag}, {tb} in {lst}:")
        w.emit(ind + 2, f"{o} += _UV[{tag}] if {tag} < 128 else _uvb({tag})")
        w.emit(ind + 2, f"{o} += _UV[len({tb})] if len({tb}) < 128 else _uvb(len({tb}))")
        w.emit(ind + 2, f"{o} += {tb}")

    def field(self, f: FieldSpec, d: str, o: str, ind: int, path: str) -> None:
        w = self.w
        v = self.version
        here = path + f.name
        nullable = _in(v, f.nullable)
        val = w.var("v")
        w.at(ind, here)
        w.emit(ind, f"{val} = {self.get(f, d)}")
        if f.is_array:
            w.emit(ind, f"if {val} is None:")
            if nullable:
                self.null(ind + 1, f, o, wide=True)
            else:
                w.emit(ind + 1, f"{o} += {self.count_bytes(f, 0)!r}")
            w.emit(ind, "else:")
            n = w.var("n")
            w.emit(ind + 1, f"{n} = len({val})")
            self.length(ind + 1, f, o, n, wide=True)
            if f.fields is None and f.type in FIXED_SIZES and f.type != "uuid":
                w.emit(ind + 1, f"{o} += _pack(f'>{{{n}}}{_FMT[f.type]}', *{val})")
                return
            e = w.var("x")
            w.emit(ind + 1, f"for {e} in {val}:")
            if f.fields is not None:
                self.struct(f.fields, e, o, ind + 2, here + "[].")
            else:
                self.scalar_value(f, e, o, ind + 2, nullable=False)
            return
        if f.fields is not None:
            if nullable:
                w.emit(ind, f"if {val} is None:")
                w.emit(ind + 1, f"{o} += b'\\xff'")
                w.emit(ind, "else:")
                w.emit(ind + 1, f"{o} += b'\\x01'")
                self.struct(f.fields, val, o, ind + 1, here + ".")
            else:
                w.emit(ind, f"if {val} is None:")
                w.emit(ind + 1, f"{val} = {{}}")
                self.struct(f.fields, val, o, ind, here + ".")
            return
        self.scalar_value(f, val, o, ind, nullable)

    def count_bytes(self, f: FieldSpec, n: int) -> bytes:
        if self.compact(f):
            return uvarint_bytes(n + 1)
        return struct.pack(">i", n)

    def scalar_value(self, f: FieldSpec, val: str, o: str, ind: int, nullable: bool) -> None:
        w = self.w
        t = f.type
        if t in FIXED_SIZES:
            arg = f"_uuid_raw({val})" if t == "uuid" else val
            w.emit(ind, f"{o} += {w.packer(_FMT[t])}({arg})")
            return
        wide = t != "string"
        if nullable:
            w.emit(ind, f"if {val} is None:")
            self.null(ind + 1, f, o, wide)
            w.emit(ind, "else:")
            ind += 1
        n = w.var("n")
        if t == "string":
            b = w.var("b")
            w.emit(ind, f"{b} = {val}.encode()")
            w.emit(ind, f"{n} = len({b})")
            self.length(ind, f, o, n, wide)
            w.emit(ind, f"{o} += {b}")
        elif t == "bytes":
            w.emit(ind, f"{n} = _rsize({val})")
            self.length(ind, f, o, n, wide)
            w.emit(ind, f"{o} += {val}")
        elif t == "records":
            w.emit(ind, f"{n} = _rsize({val})")
            self.length(ind, f, o, n, wide)
            w.emit(ind, f"if {n}:")
            w.emit(ind + 1, f"chunks.append({o})")
            w.emit(ind + 1, f"chunks.append({val})")
            w.emit(ind + 1, f"{o} = bytearray()")
        else:
            raise ValueError(f"unknown type {t}")


class MessageCodec:
    """Lazily generated decoders/encoders of one message, per version."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self._msg = _Message(spec)
        self._dec: dict[int, Decoder] = {}
        self._enc: dict[int, Encoder] = {}
        self._dec_track: dict[int, Decoder] = {}
        self._enc_track: dict[int, Encoder] = {}

    def _built(self, cache: dict[int, Any], gen: type[Any], version: int, track: bool) -> Any:
        """The generated codec for ``version``, built on first use and cached."""
        fn = cache.get(version)
        if fn is None:
            self._check(version)
            fn = cache[version] = gen(self._msg, version, track=track).build()
        return fn

    def decoder(self, version: int) -> Decoder:
        return cast(Decoder, self._built(self._dec, _DecodeGen, version, False))

    def encoder(self, version: int) -> Encoder:
        return cast(Encoder, self._built(self._enc, _EncodeGen, version, False))

    def tracking_decoder(self, version: int) -> Decoder:
        return cast(Decoder, self._built(self._dec_track, _DecodeGen, version, True))

    def tracking_encoder(self, version: int) -> Encoder:
        return cast(Encoder, self._built(self._enc_track, _EncodeGen, version, True))

    def struct_class(self) -> type[Struct]:
        return self._msg.struct_class(self.spec.name, self.spec.fields)

    def _check(self, version: int) -> None:
        if version not in self.spec.valid:
            valid = self.spec.valid
            raise UnsupportedVersionError(
                f"{self.spec.name} has no version {version} (defined: {valid.low}-{valid.high})"
            )
