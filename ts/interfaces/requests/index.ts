export * as admin from './admin.js';
export * as cluster from './cluster.js';
export * as ingress from './ingress.js';
export * as service from './service.js';
export * as corestore from './corestore.js';
export * as backup from './backup.js';
export * as runtimenetwork from './runtimenetwork.js';
export * as runtimesession from './runtimesession.js';
