/**
 * The benchmark's cost model lives in the worker's contract, so that the reconcile job (which ships
 * in the worker image) estimates what announcing documents costs with the same figures.
 */
export * from '../worker/src/contract/cost-model';
