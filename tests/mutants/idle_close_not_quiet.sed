# peer.c: the session both sides agreed to close (the IDLE that answers our IDLE_ASK) ends as a
# loss: a room that started while the close was under way fails
/^on_frame/,/^}/{
/sessions_idle_closed++;$/{
n
s/			p->quiet = true;/			;/
}
}
