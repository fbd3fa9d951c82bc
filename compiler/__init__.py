"""pipeplan.compiler: the compile driver (plan -> verified machine program) and replay packages."""
