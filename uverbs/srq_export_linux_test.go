package uverbs

// NoteAsync hands ev to the Context as if its async watcher had read it
// from the kernel: what the Context does on the events it acts on
// (CQ_ERR, SRQ_ERR, DEVICE_FATAL) runs, and the event is not queued.
func (c *Context) NoteAsync(ev AsyncEvent) { c.noteAsync(ev) }
