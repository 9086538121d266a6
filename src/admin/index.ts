export { type AdminServer, createAdminServer } from './admin-server.js';
