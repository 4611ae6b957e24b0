// graphile-worker with its batching on, as its performance guide recommends for
// many fast jobs: a local queue that fetches (and locks) 100 jobs at a time, and
// completions batched together. The benchmark passes -j 10 and --once itself.
module.exports = {
  worker: {
    localQueue: { size: 100 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};
