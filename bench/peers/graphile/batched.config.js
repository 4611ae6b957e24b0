// graphile-worker with its batching on, as its performance guide recommends for
// many fast jobs: a local queue that fetches (and locks) 100 jobs at a time, and
// completions batched together. The benchmark passes -j and --once itself, and
// BENCH_GRAPHILE_LOCAL_QUEUE when the local queue is sized to the concurrency.
module.exports = {
  worker: {
    localQueue: { size: Number(process.env.BENCH_GRAPHILE_LOCAL_QUEUE || 100) },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};
