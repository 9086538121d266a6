export * from './agents-file.js';
export * from './gate-config.js';
