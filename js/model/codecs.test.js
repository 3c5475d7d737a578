import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeArray, decodeEdges, encodeArray, sizeOf } from "./codecs.js";

test("decodeArray reads little-endian float32 from a DataView without copying", () => {
  const values = new Float32Array([1.5, -2.25, 3e-5, 1e6, 0, -0]);
  const wire = { dtype: "float32", shape: [3, 2], buffer: new DataView(values.buffer) };
  const { data, shape } = decodeArray(wire);
  assert.ok(data instanceof Float32Array);
  assert.deepEqual(shape, [3, 2]);
  assert.deepEqual(Array.from(data), Array.from(values));
  assert.equal(data.buffer, values.buffer, "aligned input must be viewed, not copied");
});

test("decodeArray accepts ArrayBuffer and Uint8Array buffers and int32", () => {
  const ints = new Int32Array([0, 7, -3, 2147483647]);
  const a = decodeArray({ dtype: "int32", shape: [2, 2], buffer: ints.buffer });
  assert.ok(a.data instanceof Int32Array);
  assert.deepEqual(Array.from(a.data), [0, 7, -3, 2147483647]);
  const b = decodeArray({ dtype: "int32", shape: [4], buffer: new Uint8Array(ints.buffer) });
  assert.deepEqual(Array.from(b.data), [0, 7, -3, 2147483647]);
});

test("decodeArray writes bytes exactly as numpy '<f4' does", () => {
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000, little-endian byte order
  const bytes = new Uint8Array([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]);
  const { data } = decodeArray({ dtype: "float32", shape: [2], buffer: new DataView(bytes.buffer) });
  assert.deepEqual(Array.from(data), [1, -2]);
});

test("decodeArray copies once when the buffer offset is unaligned", () => {
  const raw = new Uint8Array(1 + 8);
  new DataView(raw.buffer).setFloat32(1, 0.5, true);
  new DataView(raw.buffer).setFloat32(5, -4, true);
  const view = new DataView(raw.buffer, 1, 8);
  const { data } = decodeArray({ dtype: "float32", shape: [1, 2], buffer: view });
  assert.deepEqual(Array.from(data), [0.5, -4]);
  assert.notEqual(data.buffer, raw.buffer);
});

test("decodeArray maps null to null and handles empty arrays", () => {
  assert.equal(decodeArray(null), null);
  assert.equal(decodeArray(undefined), null);
  const e = decodeArray({ dtype: "float32", shape: [0, 2], buffer: new ArrayBuffer(0) });
  assert.equal(e.data.length, 0);
  assert.deepEqual(e.shape, [0, 2]);
});

test("decodeArray rejects wrong dtype, shape and byte counts with a clear message", () => {
  const buf = new DataView(new ArrayBuffer(8));
  assert.throws(() => decodeArray({ dtype: "float64", shape: [1], buffer: buf }), /unsupported dtype "float64"/);
  assert.throws(() => decodeArray({ dtype: "float32", shape: [3], buffer: buf }), /needs 12 bytes, buffer has 8/);
  assert.throws(() => decodeArray({ dtype: "float32", shape: [-1, 2], buffer: buf }), /non-negative integers/);
  assert.throws(() => decodeArray({ dtype: "float32", shape: "2", buffer: buf }), /must be a list/);
  assert.throws(
    () => decodeArray({ dtype: "float32", shape: [2], buffer: [1, 2] }),
    /DataView, ArrayBuffer or typed array/,
  );
});

test("encodeArray and decodeArray round-trip", () => {
  const values = Float32Array.from({ length: 24 }, (_, i) => Math.sin(i) * 10 ** (i % 5));
  const back = decodeArray(encodeArray(values, [2, 3, 4]));
  assert.deepEqual(back.shape, [2, 3, 4]);
  assert.deepEqual(Array.from(back.data), Array.from(values));
  assert.throws(() => encodeArray(values, [5, 5]), /does not match 24 elements/);
  assert.throws(() => encodeArray([1, 2], [2]), /Float32Array or Int32Array/);
  assert.equal(sizeOf([2, 3, 4]), 24);
  assert.equal(sizeOf([]), 1);
});

test("decodeEdges decodes indices and weights and checks their shapes", () => {
  const indices = new Int32Array([1, 2, 0, 2, 0, 1]);
  const weights = new Float32Array([0.9, 0.1, 0.5, 0.5, 0.7, 0.3]);
  const e = decodeEdges({ indices: encodeArray(indices, [3, 2]), weights: encodeArray(weights, [3, 2]) });
  assert.equal(e.n, 3);
  assert.equal(e.k, 2);
  assert.deepEqual(Array.from(e.indices), Array.from(indices));
  assert.equal(decodeEdges(null), null);
  assert.throws(
    () => decodeEdges({ indices: encodeArray(indices, [3, 2]), weights: encodeArray(weights, [2, 3]) }),
    /must both be \(n, k\)/,
  );
});
