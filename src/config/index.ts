export * from './agents-file.js';
export * from './gate-config.js';
export * from './safe-yaml.js';
