/**
 * Readers for values that crossed a wire and may be hostile: a getter could throw or answer
 * differently on every read, so these look at property descriptors and never invoke accessors.
 * Project's own definition.
 */

/** True when the key is an own data property (not an accessor). */
export const isOwnDataProperty = (recordArg: object, keyArg: string | number): boolean => {
  const descriptor = Object.getOwnPropertyDescriptor(recordArg, keyArg);
  return descriptor !== undefined && Object.hasOwn(descriptor, 'value');
};

/** The value of an own data property, or undefined for a missing key or an accessor. */
export const readOwnDataValue = (recordArg: object, keyArg: string | number): unknown => {
  const descriptor = Object.getOwnPropertyDescriptor(recordArg, keyArg);
  return descriptor !== undefined && Object.hasOwn(descriptor, 'value') ? descriptor.value : undefined;
};

/**
 * The entries of a dense array of data properties, or null when the value is not an array, is
 * sparse, carries accessors or carries extra own keys besides its indices and `length`.
 * `limitArg` bounds the work: longer arrays answer null from their length alone.
 */
export const readDataArray = (valueArg: unknown, limitArg: number): unknown[] | null => {
  if (!Array.isArray(valueArg) || valueArg.length > limitArg) {
    return null;
  }
  const entries: unknown[] = [];
  for (let index = 0; index < valueArg.length; index++) {
    if (!isOwnDataProperty(valueArg, index)) {
      return null;
    }
    entries.push(readOwnDataValue(valueArg, index));
  }
  return Object.keys(valueArg).length === valueArg.length ? entries : null;
};
