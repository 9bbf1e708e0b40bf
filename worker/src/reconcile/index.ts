/** Reconcile the bucket with the table: the library behind `npm run reconcile` and the Cloud Run job. */
export * from './notification';
export * from './reconcile';
