// The io scenario's job: wait 50 ms, as a job awaiting a network call does.
module.exports = () => new Promise((resolve) => setTimeout(resolve, 50));
