/**
 * CRC-32C (Castagnoli), the checksum of every journal and snapshot frame. Node 20 has no built-in
 * CRC-32C, so this is the table-driven form, eight bytes per step ("slicing by 8"), fast enough
 * to check a whole journal at start-up (figures: bench/results/journal.md).
 */

const polynomial = 0x82f63b78;

const tables: Uint32Array[] = (() => {
  const result = Array.from({ length: 8 }, () => new Uint32Array(256));
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) {
      c = c & 1 ? (c >>> 1) ^ polynomial : c >>> 1;
    }
    result[0][n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = result[0][n];
    for (let t = 1; t < 8; t++) {
      c = result[0][c & 0xff] ^ (c >>> 8);
      result[t][n] = c >>> 0;
    }
  }
  return result;
})();

/** CRC-32C of `bytesArg[startArg, endArg)`. */
export const crc32c = (bytesArg: Uint8Array, startArg = 0, endArg = bytesArg.length): number => {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = tables;
  let crc = 0xffffffff;
  let i = startArg;
  for (; i + 8 <= endArg; i += 8) {
    const lo = crc ^ (bytesArg[i] | (bytesArg[i + 1] << 8) | (bytesArg[i + 2] << 16) | (bytesArg[i + 3] << 24));
    crc = t7[lo & 0xff] ^ t6[(lo >>> 8) & 0xff] ^ t5[(lo >>> 16) & 0xff] ^ t4[lo >>> 24]
      ^ t3[bytesArg[i + 4]] ^ t2[bytesArg[i + 5]] ^ t1[bytesArg[i + 6]] ^ t0[bytesArg[i + 7]];
  }
  for (; i < endArg; i++) {
    crc = t0[(crc ^ bytesArg[i]) & 0xff] ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
};
