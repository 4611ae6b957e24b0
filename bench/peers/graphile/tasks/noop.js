// The benchmark's no-op job: every millisecond of the run is the queue's.
module.exports = async () => {};
