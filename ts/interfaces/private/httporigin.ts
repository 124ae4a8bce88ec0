/**
 * The rule shared by every endpoint a relay or Cloudly dials by origin (a node's Corestore, the
 * relay listener): once a text parses as a URL, it must be an http/https origin with no userinfo
 * and nothing after the port. Project's own definition.
 */

/** Every reason a parsed URL is not exactly the canonical http(s) origin `textArg` spells. */
export const collectCanonicalHttpOriginReasons = (
  parsedArg: URL,
  textArg: string,
  pathArg: string,
): string[] => {
  const reasons: string[] = [];
  if (parsedArg.protocol !== 'http:' && parsedArg.protocol !== 'https:') {
    reasons.push(`${pathArg} must use the http or https scheme`);
  }
  if (parsedArg.username !== '' || parsedArg.password !== '') {
    reasons.push(`${pathArg} must not carry userinfo`);
  }
  if (parsedArg.origin !== textArg) {
    reasons.push(
      `${pathArg} must be the canonical origin ${parsedArg.origin}, `
        + 'without a path, query, fragment, trailing slash or default port',
    );
  }
  return reasons;
};

/** The parsed URL, or null when the text does not parse. */
export const parseUrlOrNull = (textArg: string): URL | null => {
  try {
    return new URL(textArg);
  } catch {
    return null;
  }
};
