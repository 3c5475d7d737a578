"""The array codec's wire form, byte for byte: the Python half of what js/model/codecs.js decodes."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from headsne_widget.widget.serialization import array_from_wire, array_to_wire


def test_float_array_wire_form_is_exact():
    a = np.array([[1.0, -2.0], [0.5, 3e-5]], dtype=np.float64)
    wire = array_to_wire(a)
    assert set(wire) == {"dtype", "shape", "buffer"}
    assert wire["dtype"] == "float32"
    assert wire["shape"] == [2, 2]
    assert all(type(d) is int for d in wire["shape"])  # JSON ints, not numpy ints
    assert isinstance(wire["buffer"], bytes)
    # C order, little-endian float32: the same bytes js/model/codecs.test.js decodes (1.0 = 00 00 80 3f)
    assert wire["buffer"] == struct.pack("<4f", 1.0, -2.0, 0.5, 3e-5)
    assert wire["buffer"][:8] == bytes([0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0])


def test_int_array_wire_form_is_exact():
    idx = np.array([[0, 7], [-3, 2147483647]], dtype=np.int64)
    wire = array_to_wire(idx)
    assert wire == {"dtype": "int32", "shape": [2, 2], "buffer": struct.pack("<4i", 0, 7, -3, 2147483647)}


def test_non_contiguous_and_big_endian_inputs_are_written_in_c_order_little_endian():
    a = np.arange(12, dtype=">f8").reshape(3, 4).T  # Fortran-ordered view, big-endian
    wire = array_to_wire(a)
    assert wire["shape"] == [4, 3]
    assert wire["buffer"] == struct.pack("<12f", *a.ravel(order="C"))


@pytest.mark.parametrize(
    "a",
    [
        np.random.default_rng(0).normal(size=(5, 7, 3)).astype(np.float32),
        np.random.default_rng(1).integers(-1000, 1000, size=(4, 6)).astype(np.int32),
        np.zeros((0, 2), dtype=np.float32),
        np.array(2.5, dtype=np.float32),
    ],
)
def test_round_trip(a):
    back = array_from_wire(array_to_wire(a))
    assert back.dtype == a.dtype
    assert back.shape == a.shape
    np.testing.assert_array_equal(back, a)
    assert back.flags.writeable and back.flags.c_contiguous


def test_from_wire_accepts_memoryview_and_bytearray_buffers():
    # ipywidgets hands buffers received from the browser over as memoryviews
    raw = struct.pack("<3f", 1.5, -0.25, 8.0)
    for buffer in (memoryview(raw), bytearray(raw)):
        np.testing.assert_array_equal(
            array_from_wire({"dtype": "float32", "shape": [3], "buffer": buffer}), [1.5, -0.25, 8.0]
        )


def test_none_is_none():
    assert array_to_wire(None) is None
    assert array_from_wire(None) is None


def test_explicit_dtype():
    wire = array_to_wire(np.array([1, 2, 3]), dtype="float32")
    assert wire["dtype"] == "float32" and wire["buffer"] == struct.pack("<3f", 1, 2, 3)
    with pytest.raises(ValueError, match="unsupported wire dtype 'float64'"):
        array_to_wire(np.ones(2), dtype="float64")
    with pytest.raises(TypeError, match="not an integer array"):
        array_to_wire(np.ones(2), dtype="int32")


def test_non_finite_floats_are_never_sent():
    with pytest.raises(ValueError, match="NaN or inf"):
        array_to_wire(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="NaN or inf"):
        array_to_wire(np.array([[np.inf, 1.0]], dtype=np.float32))


def test_unsupported_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="complex128"):
        array_to_wire(np.array([1 + 2j]))
    with pytest.raises(ValueError, match="does not fit in int32"):
        array_to_wire(np.array([2**40]))


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        ({"dtype": "float64", "shape": [1], "buffer": bytes(8)}, ValueError, "unsupported wire dtype 'float64'"),
        ({"dtype": "float32", "shape": [3], "buffer": bytes(8)}, ValueError, "needs 12 bytes, buffer has 8"),
        ({"dtype": "float32", "shape": [-1, 2], "buffer": bytes(8)}, ValueError, "non-negative integers"),
        ({"dtype": "float32", "shape": "2", "buffer": bytes(8)}, ValueError, "non-negative integers"),
        ({"dtype": "float32", "shape": [2], "buffer": [1.0, 2.0]}, TypeError, "bytes, bytearray or memoryview"),
        ({"dtype": "float32", "shape": [2]}, ValueError, "lacks buffer"),
        ([1, 2], TypeError, "dict with dtype, shape and buffer"),
    ],
)
def test_from_wire_rejects_malformed_input(obj, error, match):
    with pytest.raises(error, match=match):
        array_from_wire(obj)
