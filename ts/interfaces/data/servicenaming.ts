import { imageVersionNamePrefix } from './imageversion.js';
/**
 * Project's own rules for what names a service and what it runs: a service name is a DNS label
 * (it becomes part of host names, container and volume names on the nodes), and an image is a
 * container image reference as registries and runtimes parse it. Pure functions the server, the
 * CLI and the dashboard share, so a form says exactly what the server will say.
 */

export const serviceNamingLimits = Object.freeze({
  /** A DNS label's limit (RFC 1123). */
  maximumNameLength: 63,
  maximumImageLength: 1024,
  maximumTagLength: 128,
} as const);

/** Lowercase letters, digits and `-`, starting and ending with a letter or digit. */
export const serviceNamePattern = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** Every reason a value is not a service name, each by path (empty when it is one). */
export const validateServiceName = (valueArg: unknown, pathArg = 'name'): string[] => {
  if (typeof valueArg !== 'string' || valueArg.length === 0 || valueArg.length > serviceNamingLimits.maximumNameLength) {
    return [`${pathArg} must be a string of 1-${serviceNamingLimits.maximumNameLength} characters`];
  }
  if (!serviceNamePattern.test(valueArg)) {
    return [`${pathArg} must be lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS label)`];
  }
  return [];
};

// The image reference grammar of the distribution project (docker/distribution `reference`):
// [domain[:port]/]path-component(/path-component)*[:tag][@digest]
const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const domain = `(?:${domainComponent}(?:\\.${domainComponent})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]{1,5})?`;
const pathComponent = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const tag = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const imageReferencePattern = new RegExp(`^(?:${domain}/)?${pathComponent}(?:/${pathComponent})*(?::${tag})?(?:@${digest})?$`);

/** Whether a string is an image reference (`nginx`, `nginx:1.27`, `registry.example.com:5000/shop/web:2@sha256:…`). */
export const isServiceImageReference = (valueArg: string): boolean => imageReferencePattern.test(valueArg);

/** Every reason a value is not an image reference, each by path (empty when it is one). */
export const validateServiceImageReference = (valueArg: unknown, pathArg = 'image'): string[] => {
  if (typeof valueArg !== 'string' || valueArg.length === 0 || valueArg.length > serviceNamingLimits.maximumImageLength) {
    return [`${pathArg} must be a string of 1-${serviceNamingLimits.maximumImageLength} characters`];
  }
  // A pushed image version (`cloudly:sha256:<digest>`, data/imageversion.ts) is not a registry
  // reference; its digest is judged by the runtime verdict (`image-plan-missing`), not here.
  if (!valueArg.startsWith(imageVersionNamePrefix) && !isServiceImageReference(valueArg)) {
    return [`${pathArg} must be an image reference: [registry[:port]/]lowercase/path[:tag][@digest]`];
  }
  return [];
};
