// The helper of `listen.ts`: every server it is sent goes back to the service, which receives it
// as a new file descriptor on the same listening socket. Plain JavaScript: it runs without the
// TypeScript loader. A connection one of its copies takes in before the copy is closed goes back
// too; once told it is done, it leaves when every copy is closed (each after its connections).
let open = 0;
let done = false;
const leaveWhenDone = () => {
  if (done && open === 0) process.disconnect();
};
process.on('message', (message, server) => {
  if (message === 'done') {
    done = true;
    return leaveWhenDone();
  }
  open++;
  server.on('connection', (socket) => process.send('connection', socket));
  process.send('copy', server, () =>
    server.close(() => {
      open--;
      leaveWhenDone();
    }),
  );
});
