# target: python/kvx/__init__.py
# The pool's size is computed in 32 bits.
s/^        self.nbytes = self.page_size \* self.npages \* self.nbufs$/        self.nbytes = (self.page_size * self.npages * self.nbufs) \& 0xFFFFFFFF/
