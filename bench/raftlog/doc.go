// Package raftlog measures raft log stores side by side: replica.LogStore (raft's log on
// execstore's write-ahead log) and hashicorp's raft-boltdb, through raft.LogStore alone.
//
//	cd bench/raftlog && go test -run '^$' -bench . -benchtime 2s
//
// It is a module of its own, for two reasons. Peers never enter the library's go.mod. And
// raft-boltdb v2.3.1 imports github.com/hashicorp/go-metrics/compat, which go-metrics
// v0.7.0 (the version raft v1.8.0 requires) no longer has: the two cannot build together
// unless go-metrics is held at v0.5.4, whose root package raft v1.8.0 builds against too.
// That replace lives here, in a module nothing else builds, and not in bench/go.mod.
package raftlog
