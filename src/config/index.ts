export * from './gate-config.js';
