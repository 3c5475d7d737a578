// A small WebGL2 helper for js/paint/point-gl.js: one program of point sprites on its own canvas, its attribute
// buffers by name (x, y: float; colour: 4 normalised bytes; kind: 1 byte), an element buffer of rows to
// draw again, and uniforms by name. No state outside the context it makes.

import { color as parseColor } from "d3-color";

/** @typedef {Record<string, number | number[]>} Uniforms */

/** The attributes: name -> [components, type name, normalised]. */
const ATTRIBUTES = /** @type {const} */ ({
  x: [1, "FLOAT", false],
  y: [1, "FLOAT", false],
  colour: [4, "UNSIGNED_BYTE", true],
  kind: [1, "UNSIGNED_BYTE", false],
});

/**
 * A CSS colour as premultiplied-ready [r, g, b, a] in 0-1 (grey when it cannot be read).
 * @param {string} css
 */
export function glColour(css) {
  const c = parseColor(css);
  const v = c ? c.rgb() : { r: 128, g: 128, b: 128, opacity: 1 };
  return [v.r / 255, v.g / 255, v.b / 255, v.opacity];
}

/**
 * @param {WebGL2RenderingContext} gl
 * @param {number} type
 * @param {string} source
 */
function shader(gl, type, source) {
  const s = gl.createShader(type);
  if (!s) return null;
  gl.shaderSource(s, source);
  gl.compileShader(s);
  return gl.getShaderParameter(s, gl.COMPILE_STATUS) ? s : null;
}

/**
 * The linked program, or null.
 * @param {WebGL2RenderingContext} gl
 * @param {string} vertex
 * @param {string} fragment
 */
function link(gl, vertex, fragment) {
  const vs = shader(gl, gl.VERTEX_SHADER, vertex);
  const fs = shader(gl, gl.FRAGMENT_SHADER, fragment);
  const program = vs && fs ? gl.createProgram() : null;
  if (!program || !vs || !fs) return null;
  gl.attachShader(program, vs);
  gl.attachShader(program, fs);
  gl.linkProgram(program);
  return gl.getProgramParameter(program, gl.LINK_STATUS) ? program : null;
}

/**
 * The vertex array of the program's attributes, one buffer each.
 * @param {WebGL2RenderingContext} gl
 * @param {WebGLProgram} program
 */
function vertexArray(gl, program) {
  const vao = gl.createVertexArray();
  gl.bindVertexArray(vao);
  /** @type {Record<string, {buffer: WebGLBuffer | null, bytes: number}>} */
  const buffers = {};
  for (const [name, [size, type, normalised]] of Object.entries(ATTRIBUTES)) {
    const buffer = gl.createBuffer();
    buffers[name] = { buffer, bytes: 0 };
    const at = gl.getAttribLocation(program, `a_${name}`);
    if (at < 0) continue;
    gl.bindBuffer(gl.ARRAY_BUFFER, buffer);
    gl.enableVertexAttribArray(at);
    gl.vertexAttribPointer(at, size, gl[type], normalised, 0, 0);
  }
  const elements = gl.createBuffer();
  gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, elements);
  gl.bindVertexArray(null);
  return { vao, buffers, elements };
}

// renderers that draw in software (chromium's SwiftShader, Mesa's llvmpipe, Windows' basic renderer)
const SOFTWARE = /swiftshader|llvmpipe|softpipe|software|basic render/i;

/**
 * Whether `gl` draws in software (its renderer's name says so).
 * @param {WebGL2RenderingContext} gl
 */
function software(gl) {
  const info = gl.getExtension("WEBGL_debug_renderer_info");
  const names = [gl.getParameter(gl.RENDERER), info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : ""];
  return names.some((name) => SOFTWARE.test(String(name)));
}

/**
 * The point program on `canvas`, or null without WebGL2 (or when it does not compile, or the points'
 * sprites cannot be as large as 32 device px); `software`: the context draws in software.
 * @param {HTMLCanvasElement} canvas
 * @param {string} vertex
 * @param {string} fragment
 */
export function glProgram(canvas, vertex, fragment) {
  /** @type {WebGL2RenderingContext | null} */
  let gl = null;
  try {
    const options = { alpha: true, premultipliedAlpha: true, antialias: false, depth: false, stencil: false };
    gl = /** @type {WebGL2RenderingContext | null} */ (canvas.getContext("webgl2", options));
    if (!gl || typeof gl.createVertexArray !== "function") return null;
    const range = gl.getParameter(gl.ALIASED_POINT_SIZE_RANGE);
    if (!range || range[1] < 32) return null;
  } catch {
    return null;
  }
  const program = link(gl, vertex, fragment);
  if (!program) return null;
  return { ...programOn(gl, canvas, program), software: software(gl) };
}

/**
 * @param {WebGL2RenderingContext} gl
 * @param {HTMLCanvasElement} canvas
 * @param {WebGLProgram} program
 */
function programOn(gl, canvas, program) {
  const { vao, buffers, elements } = vertexArray(gl, program);
  /** @type {Map<string, WebGLUniformLocation | null>} */
  const locations = new Map();
  let elementBytes = 0;
  /** @param {Uniforms} values */
  function uniforms(values) {
    for (const [name, value] of Object.entries(values)) {
      if (!locations.has(name)) locations.set(name, gl.getUniformLocation(program, name));
      const at = locations.get(name) ?? null;
      if (name === "u_mark") gl.uniform1i(at, /** @type {number} */ (value));
      else if (typeof value === "number") gl.uniform1f(at, value);
      else if (value.length === 2) gl.uniform2fv(at, value);
      else gl.uniform4fv(at, value);
    }
  }
  /**
   * Data into a buffer: reallocated when it grows, else overwritten in place.
   * @param {number} target
   * @param {WebGLBuffer | null} buffer
   * @param {ArrayBufferView} data
   * @param {number} capacity bytes allocated so far
   */
  function fill(target, buffer, data, capacity) {
    gl.bindBuffer(target, buffer);
    if (data.byteLength > capacity) {
      gl.bufferData(target, data.byteLength, gl.DYNAMIC_DRAW);
      capacity = data.byteLength;
    }
    gl.bufferSubData(target, 0, data);
    return capacity;
  }
  return {
    canvas,
    /** Size the target (W x H device px), clear it; false when the context is lost. */
    begin(/** @type {number} */ W, /** @type {number} */ H) {
      if (gl.isContextLost()) return false;
      if (canvas.width !== W || canvas.height !== H) Object.assign(canvas, { width: W, height: H });
      gl.viewport(0, 0, W, H);
      gl.clearColor(0, 0, 0, 0);
      gl.clear(gl.COLOR_BUFFER_BIT);
      gl.enable(gl.BLEND);
      gl.blendFunc(gl.ONE, gl.ONE_MINUS_SRC_ALPHA);
      gl.useProgram(program);
      gl.bindVertexArray(vao);
      return true;
    },
    /** An attribute's data (one value per point). @param {keyof typeof ATTRIBUTES} name @param {ArrayBufferView} data */
    data(name, data) {
      const b = buffers[name];
      b.bytes = fill(gl.ARRAY_BUFFER, b.buffer, data, b.bytes);
    },
    /** The rows drawn again by `drawMarked`. @param {Uint32Array} rows */
    elements(rows) {
      gl.bindVertexArray(vao);
      elementBytes = fill(gl.ELEMENT_ARRAY_BUFFER, elements, rows.length ? rows : new Uint32Array(1), elementBytes);
    },
    /** The first `count` points. @param {Uniforms} values @param {number} count */
    draw(values, count) {
      uniforms(values);
      if (count > 0) gl.drawArrays(gl.POINTS, 0, count);
    },
    /** `count` rows of the element buffer from `offset`. @param {Uniforms} values @param {number} offset @param {number} count */
    drawMarked(values, offset, count) {
      if (count <= 0) return;
      uniforms(values);
      gl.drawElements(gl.POINTS, count, gl.UNSIGNED_INT, 4 * offset);
    },
  };
}
