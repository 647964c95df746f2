# A client that stops reading: it sends an HTTP request over a socket whose receive buffer is
# fixed small (Node cannot set SO_RCVBUF on TCP sockets, and Linux would otherwise let an unread
# socket buffer tens of megabytes), waits for a line on stdin, then reads to the end and writes
# what it received to stdout.
import socket, sys

host, port, request = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((host, port))
s.sendall(request.encode().decode('unicode_escape').encode())
sys.stderr.write('sent\n')
sys.stderr.flush()
sys.stdin.readline()
out = sys.stdout.buffer
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    out.write(chunk)
out.flush()
