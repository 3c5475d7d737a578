"""The binary array codec between Python and the browser, mirrored by ``js/model/codecs.js``.

An array crosses the wire as ``{"dtype": "float32" | "int32", "shape": [...], "buffer": bytes}``:
C order, little-endian. ipywidgets lifts every ``bytes`` value out of the JSON and sends it as a
binary buffer, so a frame of m tokens costs 8 m bytes instead of a JSON list of decimal strings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: wire dtype name -> the numpy dtype its bytes are written in
WIRE_DTYPES: dict[str, np.dtype] = {"float32": np.dtype("<f4"), "int32": np.dtype("<i4")}

_INT32 = np.iinfo(np.int32)


def _wire_dtype(a: np.ndarray, dtype: str | None) -> str:
    """Pick the wire dtype: floats go as float32, integers and booleans as int32."""
    if dtype is not None:
        if dtype not in WIRE_DTYPES:
            raise ValueError(f"unsupported wire dtype {dtype!r}: use 'float32' or 'int32'")
        return dtype
    if a.dtype.kind == "f":
        return "float32"
    if a.dtype.kind in "iub":
        return "int32"
    raise TypeError(f"cannot send an array of dtype {a.dtype} to the browser: only real floats and integers")


def array_to_wire(a: Any, dtype: str | None = None) -> dict[str, Any] | None:
    """Encode an array as the wire dict ``{"dtype", "shape", "buffer"}``; ``None`` stays ``None``.

    Floats are sent as float32 and must be finite (the browser never receives NaN or inf);
    integers are sent as int32 and must fit in it.
    """
    if a is None:
        return None
    a = np.asarray(a)
    name = _wire_dtype(a, dtype)
    if name == "float32":
        if a.dtype.kind not in "fiub":
            raise TypeError(f"cannot send an array of dtype {a.dtype} as float32")
        if a.size and not np.isfinite(a).all():
            raise ValueError(f"array of shape {a.shape} holds NaN or inf: refusing to send it to the browser")
    else:
        if a.dtype.kind not in "iub":
            raise TypeError(f"cannot send an array of dtype {a.dtype} as int32: it is not an integer array")
        if a.size and (a.min() < _INT32.min or a.max() > _INT32.max):
            raise ValueError(f"integer array of shape {a.shape} does not fit in int32")
    wire = np.asarray(a, dtype=WIRE_DTYPES[name], order="C")
    return {"dtype": name, "shape": [int(d) for d in wire.shape], "buffer": wire.tobytes()}


def array_from_wire(obj: dict[str, Any] | None) -> np.ndarray | None:
    """Decode a wire dict into a numpy array (native byte order, a copy); ``None`` stays ``None``.

    Accepts ``bytes``, ``bytearray`` or ``memoryview`` buffers (ipywidgets hands incoming buffers
    over as memoryviews) and checks dtype, shape and byte count.
    """
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise TypeError(f"a wire array is a dict with dtype, shape and buffer, got {type(obj).__name__}")
    missing = {"dtype", "shape", "buffer"} - obj.keys()
    if missing:
        raise ValueError(f"wire array lacks {', '.join(sorted(missing))}")
    name, shape, buffer = obj["dtype"], obj["shape"], obj["buffer"]
    if name not in WIRE_DTYPES:
        raise ValueError(f"unsupported wire dtype {name!r}: expected 'float32' or 'int32'")
    if not isinstance(shape, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise ValueError(f"wire array shape must be a list of non-negative integers, got {shape!r}")
    if not isinstance(buffer, (bytes, bytearray, memoryview)):
        raise TypeError(f"wire array buffer must be bytes, bytearray or memoryview, got {type(buffer).__name__}")
    raw = memoryview(buffer).cast("B")
    dt = WIRE_DTYPES[name]
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if raw.nbytes != expected:
        raise ValueError(f"wire array of shape {list(shape)} needs {expected} bytes, buffer has {raw.nbytes}")
    return np.frombuffer(raw, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))


def array_serializers(dtype: str) -> dict[str, Any]:
    """``to_json``/``from_json`` for a trait holding a numpy array (or None), sent as ``dtype`` wire arrays.

    Attach with ``.tag(sync=True, **array_serializers("float32"))``, as jupyter-scatter does: Python
    holds the array, the wire carries the binary buffer, ``js/model/codecs.js`` decodes it.
    """
    return {
        "to_json": lambda value, widget: array_to_wire(value, dtype),
        "from_json": lambda value, widget: array_from_wire(value),
    }


def arrays_serializers(dtypes: dict[str, str]) -> dict[str, Any]:
    """Serializers for a trait holding a dict of named numpy arrays (or None), e.g. partner indices and weights."""

    def to_json(value: dict[str, Any] | None, widget: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        return {name: array_to_wire(value[name], dtype) for name, dtype in dtypes.items()}

    def from_json(value: dict[str, Any] | None, widget: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        return {name: array_from_wire(value[name]) for name in dtypes}

    return {"to_json": to_json, "from_json": from_json}
