/**
 * True only when the two types are the same (each assignable to the other, `any` and optional
 * members told apart): for compile-time checks that a type was inferred exactly, as in
 * `const inferred: TSame<typeof answer, { cluster: ICluster }> = true;`.
 */
export type TSame<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
