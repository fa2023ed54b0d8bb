# every room of a --window-check sampled run is sampled, also those outside the window
/^room_sampled(/,/^}/s/return b->o.window_sampled && .*/return b->o.window_sampled;/
