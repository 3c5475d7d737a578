// Array codec, the mirror of headsne_widget/serialization.py (see js/PROTOCOL.md, "Arrays").
// Wire form: {dtype: "float32" | "int32", shape: number[], buffer: DataView | ArrayBuffer | TypedArray},
// little-endian, C order. Decoded form: {data: Float32Array | Int32Array, shape: number[]}.

const TYPES = { float32: Float32Array, int32: Int32Array };

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Byte view {buffer, byteOffset, byteLength} of whatever ipywidgets handed us.
 * @param {unknown} buffer
 * @returns {{buffer: ArrayBufferLike, byteOffset: number, byteLength: number}}
 */
function bytesOf(buffer) {
  if (buffer instanceof ArrayBuffer) {
    return { buffer, byteOffset: 0, byteLength: buffer.byteLength };
  }
  if (ArrayBuffer.isView(buffer)) {
    return { buffer: buffer.buffer, byteOffset: buffer.byteOffset, byteLength: buffer.byteLength };
  }
  throw new TypeError(`array buffer must be a DataView, ArrayBuffer or typed array, got ${typeof buffer}`);
}

/** Number of elements of `shape`, checking that it is a list of non-negative integers. */
/** @param {unknown} shape */
export function sizeOf(shape) {
  if (!Array.isArray(shape)) throw new TypeError(`array shape must be a list, got ${JSON.stringify(shape)}`);
  let size = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0)
      throw new TypeError(`array shape must hold non-negative integers, got ${JSON.stringify(shape)}`);
    size *= d;
  }
  return size;
}

/**
 * Decode a wire array. Returns null for null/undefined (an empty trait). The result shares memory
 * with the received buffer when its offset is aligned (the common case); otherwise it is copied once.
 * @param {{dtype: string, shape: number[], buffer: unknown} | null | undefined} obj
 * @returns {{data: Float32Array | Int32Array, shape: number[]} | null}
 */
export function decodeArray(obj) {
  if (obj == null) return null;
  const { dtype, shape, buffer } = obj;
  const Type = dtype === "float32" || dtype === "int32" ? TYPES[dtype] : undefined;
  if (!Type) throw new TypeError(`unsupported dtype ${JSON.stringify(dtype)}: expected "float32" or "int32"`);
  const size = sizeOf(shape);
  const bytes = bytesOf(buffer);
  if (bytes.byteLength !== size * 4) {
    throw new RangeError(`array of shape [${shape}] needs ${size * 4} bytes, buffer has ${bytes.byteLength}`);
  }
  const whole = /** @type {ArrayBuffer} */ (bytes.buffer);
  let data;
  if (!LITTLE_ENDIAN) {
    data = new Type(size);
    const view = new DataView(whole, bytes.byteOffset, bytes.byteLength);
    const get =
      dtype === "float32"
        ? (/** @type {number} */ i) => view.getFloat32(4 * i, true)
        : (/** @type {number} */ i) => view.getInt32(4 * i, true);
    for (let i = 0; i < size; i++) data[i] = get(i);
  } else if (bytes.byteOffset % 4 === 0) {
    data = new Type(whole, bytes.byteOffset, size);
  } else {
    data = new Type(whole.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  }
  return { data, shape: shape.slice() };
}

/**
 * Encode a typed array into the wire form (used by tests and by anything JS sends back).
 * @param {Float32Array | Int32Array} data
 * @param {number[]} shape
 * @returns {import("./model.js").WireArray}
 */
export function encodeArray(data, shape) {
  const dtype = data instanceof Float32Array ? "float32" : data instanceof Int32Array ? "int32" : null;
  if (!dtype) throw new TypeError("encodeArray needs a Float32Array or Int32Array");
  if (sizeOf(shape) !== data.length) throw new RangeError(`shape [${shape}] does not match ${data.length} elements`);
  const copy = data.slice();
  if (!LITTLE_ENDIAN) {
    const view = new DataView(copy.buffer);
    for (let i = 0; i < copy.length; i++) {
      if (dtype === "float32") view.setFloat32(4 * i, data[i], true);
      else view.setInt32(4 * i, data[i], true);
    }
  }
  return { dtype, shape: shape.slice(), buffer: new DataView(copy.buffer) };
}

/**
 * Decode the `edges` trait {indices: int32 (n, k), weights: float32 (n, k)} into
 * {indices, weights, n, k}; null when absent. Shapes must agree.
 * @param {import("./model.js").WireEdges | null | undefined} obj
 * @returns {import("../lib/partners.js").Edges | null}
 */
export function decodeEdges(obj) {
  if (obj == null) return null;
  const indices = decodeArray(obj.indices);
  const weights = decodeArray(obj.weights);
  if (!indices || !weights) return null;
  if (indices.shape.length !== 2 || indices.shape[0] !== weights.shape[0] || indices.shape[1] !== weights.shape[1]) {
    throw new RangeError(`edges indices [${indices.shape}] and weights [${weights.shape}] must both be (n, k)`);
  }
  if (!(indices.data instanceof Int32Array)) throw new TypeError("edges indices must be int32");
  const weightData = /** @type {Float32Array} */ (weights.data);
  return { indices: indices.data, weights: weightData, n: indices.shape[0], k: indices.shape[1] };
}
