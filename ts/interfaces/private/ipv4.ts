/** IPv4 helpers shared by the contracts that carry addresses. */

/** Dotted-quad with no leading zeros, each octet 0-255. */
export const isDottedQuad = (valueArg: unknown): valueArg is string => {
  if (typeof valueArg !== 'string') {
    return false;
  }
  const parts = valueArg.split('.');
  return parts.length === 4 && parts.every((part) => /^(0|[1-9][0-9]{0,2})$/.test(part) && Number(part) <= 255);
};

export const ipv4ToNumber = (valueArg: string): number =>
  valueArg.split('.').reduce((sum, part) => sum * 256 + Number(part), 0);

/**
 * A unicast address a host could carry on an uplink: not unspecified (0/8), loopback (127/8),
 * link-local (169.254/16), multicast (224/4), reserved (240/4) or broadcast.
 */
export const isPlausibleUnicastIpv4 = (valueArg: unknown): valueArg is string => {
  if (!isDottedQuad(valueArg)) {
    return false;
  }
  const [first, second] = valueArg.split('.').map(Number);
  if (first === 0 || first === 127 || first >= 224) {
    return false;
  }
  return !(first === 169 && second === 254);
};

/** `a.b.c.d/n` with the address being the network address of the prefix. */
export const parseIpv4Prefix = (valueArg: unknown): { network: number; length: number } | null => {
  if (typeof valueArg !== 'string') {
    return null;
  }
  const [address, lengthText, ...rest] = valueArg.split('/');
  if (rest.length > 0 || !isDottedQuad(address) || !/^(0|[1-9][0-9]?)$/.test(lengthText ?? '')) {
    return null;
  }
  const length = Number(lengthText);
  if (length > 32) {
    return null;
  }
  const network = ipv4ToNumber(address);
  const mask = length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0;
  return ((network & mask) >>> 0) === network ? { network, length } : null;
};

export const isIpv4InPrefix = (addressArg: string, prefixArg: { network: number; length: number }): boolean => {
  const mask = prefixArg.length === 0 ? 0 : (0xffffffff << (32 - prefixArg.length)) >>> 0;
  return ((ipv4ToNumber(addressArg) & mask) >>> 0) === prefixArg.network;
};
