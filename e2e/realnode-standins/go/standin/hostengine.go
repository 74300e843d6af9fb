package main

// Stand-in for DCGM's host engine (nvcr.io/nvidia/cloud-native/dcgm, `nv-hostengine`), for the
// real-node lane.
//
// Contract honoured (states/state-dcgm/0500_daemonset.yaml): accepts TCP connections on port
// 5555 (NVIDIA_STANDIN_HOSTENGINE_ADDR overrides ":5555"), which is all the DaemonSet's tcpSocket
// probes check. It speaks no DCGM protocol: connections are closed at once.

import (
	"context"
	"log"
	"net"
	"os/signal"
	"syscall"
)

func runHostEngine([]string) error {
	l, err := net.Listen("tcp", envOr("NVIDIA_STANDIN_HOSTENGINE_ADDR", ":5555"))
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	log.Printf("listening on %s", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		c.Close()
	}
}
