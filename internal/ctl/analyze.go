package ctl

func analyzeCmd(e *Env, args []string) int { return 2 }
