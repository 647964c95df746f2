// The helper of `listen.ts`: every listening handle it is sent goes back to the service, which
// receives it as a new file descriptor on the same socket. It never listens itself, so it takes
// in no connection; and it leaves with the service (its last copy would keep the port open).
// Plain JavaScript: it runs without the TypeScript loader.
process.on('disconnect', () => process.exit(0));
process.on('message', (_message, handle) => {
  if (handle) process.send('copy', handle, () => handle.close());
  else process.send('copy');
});
