export { Cloudly, type ICloudlyOptions, type IAdminHandlerContext, type IRelayHandlerContext } from './classes.cloudly.js';
export { readConfig, type ICloudlyConfig } from './config.js';
export { CloudlyAdminClient } from './client/admin.js';
export { CloudlyRelayClient } from './client/relay.js';
export { CloudlyRefusal, type IRefusal } from './core/refusal.js';
export * as contracts from './interfaces/index.js';
