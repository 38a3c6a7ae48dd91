/*
 * grpc.h: the gRPC face of sluiced (--grpc-port; src/server/grpc.c): h2c
 * on --bind's address, on a thread and libuv loop of its own.
 */
#ifndef SL_SERVER_GRPC_H
#define SL_SERVER_GRPC_H

struct sl_server;

/* Listens on cfg.grpc_port (0: does nothing) and starts the face's thread.
 * Returns 0, or -1 with the error logged ("cannot listen on
 * 127.0.0.1:8081 (gRPC): Address already in use") and nothing left open. */
int sl_grpc_start(struct sl_server *srv);

/* Stops accepting, says GOAWAY to every connection, closes them and waits
 * for the thread; a no-op when the face is off. */
void sl_grpc_stop(struct sl_server *srv);

#endif
