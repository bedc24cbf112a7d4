package config

import (
	"fmt"
	"os"
)

var levels = map[string]int{"": 0, "WARN": 1, "INFO": 2, "TRACE": 3}

func enabled(level string) bool { return levels[Get().Debug] >= levels[level] }

// Warnf logs at PURLIN_DEBUG=WARN and above.
func Warnf(format string, args ...any) { logf("WARN", format, args...) }

// Infof logs at PURLIN_DEBUG=INFO and above.
func Infof(format string, args ...any) { logf("INFO", format, args...) }

// Tracef logs at PURLIN_DEBUG=TRACE.
func Tracef(format string, args ...any) { logf("TRACE", format, args...) }

func logf(level, format string, args ...any) {
	if !enabled(level) {
		return
	}
	host, _ := os.Hostname()
	fmt.Fprintf(os.Stderr, "%s:%d purlin %s %s\n", host, os.Getpid(), level, fmt.Sprintf(format, args...))
}
