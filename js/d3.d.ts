// Types of the few d3 functions the front end uses (the d3 modules ship no declarations; `tsc --checkJs`
// with "strict" needs them). Only what js/ calls, as js/ calls it.

declare module "d3-array" {
  export function max(values: ArrayLike<number>): number | undefined;
  export function bisectRight(values: ArrayLike<number>, x: number, lo?: number, hi?: number): number;
  export function quantileSorted(values: ArrayLike<number>, p: number): number | undefined;
  export function ticks(start: number, stop: number, count: number): number[];
  export function tickStep(start: number, stop: number, count: number): number;
}

declare module "d3-color" {
  export interface RGBColor {
    r: number;
    g: number;
    b: number;
    opacity: number;
  }
  export interface Color {
    rgb(): RGBColor;
  }
  export function color(specifier: string): Color | null;
}

declare module "d3-format" {
  export function format(specifier: string): (n: number) => string;
  export function precisionFixed(step: number): number;
  export function precisionRound(step: number, max: number): number;
}

declare module "d3-polygon" {
  export function polygonContains(polygon: [number, number][], point: [number, number]): boolean;
}

declare module "d3-scale" {
  export interface ScaleLinear {
    (value: number): number;
    domain(): number[];
    ticks(count?: number): number[];
    tickFormat(count?: number): (d: number) => string;
  }
  export function scaleLinear(domain: number[], range: number[]): ScaleLinear;
  export interface ScaleSequential {
    (value: number): number;
    clamp(clamp: boolean): ScaleSequential;
  }
  export function scaleSequentialSqrt(domain: number[], interpolator: (t: number) => number): ScaleSequential;
}

declare module "d3-scale-chromatic" {
  export function interpolatePlasma(t: number): string;
  export function interpolateViridis(t: number): string;
  export const schemeCategory10: readonly string[];
}

declare module "d3-selection" {
  export interface Selection {
    call(fn: (selection: Selection, ...args: any[]) => void, ...args: any[]): Selection;
    on(typenames: string, listener: null): Selection;
  }
  export function select(node: Element): Selection;
}

declare module "d3-zoom" {
  import type { ScaleLinear } from "d3-scale";
  import type { Selection } from "d3-selection";
  export interface ZoomTransform {
    rescaleX(x: ScaleLinear): ScaleLinear;
    rescaleY(y: ScaleLinear): ScaleLinear;
  }
  export interface ZoomEvent {
    transform: ZoomTransform;
    sourceEvent: Event | null;
  }
  export interface ZoomBehavior {
    (selection: Selection): void;
    scaleExtent(extent: [number, number]): ZoomBehavior;
    filter(filter: (event: any) => boolean): ZoomBehavior;
    on(typenames: string, listener: (event: ZoomEvent) => void): ZoomBehavior;
    transform(selection: Selection, transform: ZoomTransform): void;
  }
  export function zoom(): ZoomBehavior;
  export const zoomIdentity: ZoomTransform;
}

declare module "d3-contour" {
  export interface ContourMultiPolygon {
    type: "MultiPolygon";
    value: number;
    coordinates: [number, number][][][];
  }
  export interface ContourDensity<D> {
    (data: Iterable<D>): ContourMultiPolygon[];
    x(x: (d: D) => number): ContourDensity<D>;
    y(y: (d: D) => number): ContourDensity<D>;
    size(size: [number, number]): ContourDensity<D>;
    cellSize(size: number): ContourDensity<D>;
    bandwidth(bandwidth: number): ContourDensity<D>;
    thresholds(count: number | number[]): ContourDensity<D>;
  }
  export function contourDensity<D = any>(): ContourDensity<D>;
}
