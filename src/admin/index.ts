export { createAdminServer, type AdminServer } from './admin-server.js';
