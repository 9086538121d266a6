/** `effectgate/undici`: the in-process front door for Node agents (docs/design.md §1, §4.2). */
export { type GateInterceptorOptions, gateInterceptor } from './gate-interceptor.js';
