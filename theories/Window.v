(** * Window: a pass checked on the region it changed

    [Certify.validate_firings] checks a pass on the whole graphs before and
    after it. A pass changes a region: each firing's match (its root down
    to its bindings), the nodes it creates, the users of what it replaced.
    This file proves the step that lets a validator read only that region:
    [window_rewrite_preserves] says that if the certificate checker accepts
    a pass between two windows (small graphs: the region before the pass,
    [wb], and after it, [wa]), and outside the windows the graph after the
    pass is the graph before it, then every output of the whole graph after
    the pass denotes what it did before.

    A window's node is either a copy of a node of its whole graph (the same
    label, its arguments the copies of the whole node's arguments) or a
    frontier leaf: a node outside the region that the region reads (a
    binding, an argument of a changed user), the same node of both graphs,
    given in the windows by a label of its own and no argument ([fr]: the
    frontier label's node after and before the pass). The certificate
    checker's theorem ([Certify.rewrite_preserves]) holds for every
    interpretation of the labels, so for one that gives each frontier label
    the value of its node: the windows then denote what the whole graphs do
    at their nodes ([window_dnode]), and an induction over the graph before
    the pass carries that to every node kept outside the windows and to
    every output ([window_preserves]).

    The rule equations are then needed for every value of the frontier
    labels ([rule_eq] under each interpretation that differs from the given
    one only there): a rule's equation over its bindings, whatever values
    they take, as [check-rules] proves or tests it. With no frontier and
    each window its whole graph, the hypotheses hold ([window_whole]): the
    statement generalizes [Certify.rewrite_preserves]. *)

From Coq Require Import List Arith Lia.
From PyPM Require Import Syntax Declarative Entry Rewrite Certify.
Import ListNotations.

Section Window.
  Variable V : Type.
  Variable interp : nat -> list V -> V.
  Variable dflt : V.
  Notation dn := (dnode V interp dflt).

  (** The frontier: [fr l = Some (a, b)] makes [l] a frontier label, the
      leaf standing for node [a] of the graph after the pass and node [b]
      of the graph before it. *)
  Variable fr : nat -> option (nat * nat).

  (** Window [w] of graph [g] through [e] (window node -> node of [g]);
      [side] picks the frontier node of [g]'s side. *)
  Definition embeds (g w : tgraph) (e : nat -> nat) (side : nat * nat -> nat) : Prop :=
    forall i, i < length (tnodes w) ->
      e i < length (tnodes g) /\
      match fr (tlabel (tnode_at w i)) with
      | Some p => targs (tnode_at w i) = [] /\ e i = side p
      | None => tlabel (tnode_at g (e i)) = tlabel (tnode_at w i) /\
                targs (tnode_at g (e i)) = map e (targs (tnode_at w i))
      end.

  (** The interpretation that gives frontier label [l] the value [fv l]. *)
  Definition finterp (fv : nat -> V) (l : nat) (vs : list V) : V :=
    match fr l with Some _ => fv l | None => interp l vs end.

  (** [j] is [i] or below it (an argument of an argument ...). *)
  Inductive below (w : tgraph) : nat -> nat -> Prop :=
  | below_refl : forall i, below w i i
  | below_arg : forall i a j, In a (targs (tnode_at w i)) -> below w a j -> below w i j.

  Lemma map_ext_in_eq : forall (f g : nat -> V) l, (forall a, In a l -> f a = g a) ->
    map f l = map g l.
  Proof. intros f g l H. apply map_ext_in. exact H. Qed.

  (** A window node denotes what its node of the whole graph does, when the
      frontier leaves below it have their nodes' values. *)
  Lemma window_dnode : forall g w e side fv,
    wf_tgraph g -> wf_tgraph w -> embeds g w e side ->
    forall i, i < length (tnodes w) ->
      (forall j p, below w i j -> j < length (tnodes w) ->
         fr (tlabel (tnode_at w j)) = Some p -> fv (tlabel (tnode_at w j)) = dn g (side p)) ->
      dnode V (finterp fv) dflt w i = dn g (e i).
  Proof.
    intros g w e side fv [Hg _] [Hw _] He i. induction i as [i IH] using lt_wf_ind.
    intros Hi Hf.
    rewrite (dnode_eq V (finterp fv) dflt w i (fun a => Hw i a Hi) Hi).
    destruct (He i Hi) as [Hei Hk]. unfold finterp at 1.
    destruct (fr (tlabel (tnode_at w i))) as [p|] eqn:Efr.
    - destruct Hk as [_ ->]. exact (Hf i p (below_refl w i) Hi Efr).
    - destruct Hk as [Hlab Hargs].
      rewrite (dnode_eq V interp dflt g (e i) (fun a => Hg (e i) a Hei) Hei).
      rewrite Hlab, Hargs, map_map. f_equal. apply map_ext_in_eq. intros a Ha.
      pose proof (Hw i a Hi Ha) as Hai.
      apply IH; [exact Hai | lia |].
      intros j q Hb Hj Hq. exact (Hf j q (below_arg w i a j Ha Hb) Hj Hq).
  Qed.

  (** Below a node of a window, the whole graph's nodes come no later. *)
  Lemma below_le : forall g w e side,
    wf_tgraph g -> wf_tgraph w -> embeds g w e side ->
    forall i j, below w i j -> i < length (tnodes w) -> e j <= e i.
  Proof.
    intros g w e side [Hg _] [Hw _] He i j Hb. induction Hb as [i|i a j Ha Hb IH]; intros Hi;
      [lia|].
    pose proof (Hw i a Hi Ha) as Hai.
    destruct (He i Hi) as [Hei Hk].
    destruct (fr (tlabel (tnode_at w i))) as [p|].
    - destruct Hk as [Hn _]. rewrite Hn in Ha. destruct Ha.
    - destruct Hk as [_ Hargs].
      assert (Hin : In (e a) (targs (tnode_at g (e i)))) by (rewrite Hargs; apply in_map; exact Ha).
      pose proof (Hg (e i) (e a) Hei Hin). specialize (IH ltac:(lia)). lia.
  Qed.

  Variables (B A wb wa : tgraph) (eb ea : nat -> nat) (km : nat -> option nat).

  (** After node [h] stands for before node [g]: it is [g] kept ([km]), or
      they are the windows' [k]-th outputs. *)
  Definition stands (h g : nat) : Prop :=
    km h = Some g \/
    exists k oa ob, nth_error (touts wa) k = Some oa /\ nth_error (touts wb) k = Some ob /\
                    h = ea oa /\ g = eb ob.

  (** The frontier values: each frontier label's node after the pass. *)
  Definition fvals (l : nat) : V := match fr l with Some (a, _) => dn A a | None => dflt end.

  Variable HwB : wf_tgraph B.
  Variable HwA : wf_tgraph A.
  Variable Hwb : wf_tgraph wb.
  Variable Hwa : wf_tgraph wa.
  Variable Heb : embeds B wb eb snd.
  Variable Hea : embeds A wa ea fst.
  (** Outside the windows, the graph after the pass is the graph before it. *)
  Variable Hkept : forall h g, km h = Some g ->
    h < length (tnodes A) /\ g < length (tnodes B) /\
    tlabel (tnode_at A h) = tlabel (tnode_at B g) /\
    Forall2 stands (targs (tnode_at A h)) (targs (tnode_at B g)).
  (** A frontier node is kept. *)
  Variable Hfront : forall l a b, fr l = Some (a, b) -> km a = Some b.
  Variable Houts : Forall2 stands (touts A) (touts B).
  (** The windows' outputs denote alike, frontier labels given their values. *)
  Variable Hwin : denote V (finterp fvals) dflt wa = denote V (finterp fvals) dflt wb.

  Lemma Forall2_dn : forall hs gs, Forall2 stands hs gs ->
    (forall h g, In g gs -> stands h g -> dn A h = dn B g) -> map (dn A) hs = map (dn B) gs.
  Proof.
    intros hs gs H. induction H as [|h g hs gs Hs _ IHl]; intros Hq; simpl; [reflexivity|].
    rewrite (Hq h g (or_introl eq_refl) Hs). f_equal. apply IHl. intros; apply Hq; simpl; auto.
  Qed.

  Lemma stands_dn : forall g h, g < length (tnodes B) -> stands h g -> dn A h = dn B g.
  Proof.
    pose proof HwB as [HgB HoB]. pose proof Hwa as [_ Hoa]. pose proof Hwb as [_ Hob].
    intro g. induction g as [g IH] using lt_wf_ind. intros h Hg.
    (* a node kept *)
    assert (Hk : forall h', km h' = Some g -> dn A h' = dn B g).
    { intros h' Hkm. destruct (Hkept h' g Hkm) as (Hh & _ & Hlab & Hargs).
      pose proof HwA as [HgA _].
      rewrite (dnode_eq V interp dflt A h' (fun a => HgA h' a Hh) Hh).
      rewrite (dnode_eq V interp dflt B g (fun a => HgB g a Hg) Hg).
      rewrite Hlab. f_equal. apply Forall2_dn; [exact Hargs|].
      intros a b Hb Hs. pose proof (HgB g b Hg Hb). apply IH; [lia | lia | exact Hs]. }
    intros [Hkm | (k & oa & ob & Ha & Hb & -> & ->)]; [exact (Hk h Hkm)|].
    pose proof (Hoa oa (nth_error_In _ _ Ha)) as Hoa'.
    pose proof (Hob ob (nth_error_In _ _ Hb)) as Hob'.
    (* the windows' k-th outputs denote alike *)
    assert (Hk' : dnode V (finterp fvals) dflt wa oa = dnode V (finterp fvals) dflt wb ob).
    { assert (E := f_equal (fun l => nth_error l k) Hwin). simpl in E. unfold denote in E.
      rewrite !nth_error_map, Ha, Hb in E. simpl in E. congruence. }
    rewrite <- (window_dnode A wa ea fst fvals HwA Hwa Hea oa Hoa').
    - rewrite <- (window_dnode B wb eb snd fvals HwB Hwb Heb ob Hob'); [exact Hk'|].
      intros j [a b] Hbl Hj Hq. simpl. unfold fvals. rewrite Hq.
      pose proof (Hfront _ _ _ Hq) as Hkab.
      destruct (Heb j Hj) as [HejB Hkj]. rewrite Hq in Hkj. destruct Hkj as [_ Hej].
      simpl in Hej. rewrite <- Hej in Hkab |- *.
      (* the frontier node is [ob] itself, or below it, so earlier *)
      destruct Hbl as [i0 | i0 a0 j0 Ha0 Hb0].
      + exact (Hk a Hkab).
      + pose proof Hwb as [Hwb1 _].
        pose proof (Hwb1 i0 a0 Hob' Ha0) as Ha0ob.
        pose proof (below_le B wb eb snd HwB Hwb Heb a0 j0 Hb0 ltac:(lia)) as Hle.
        destruct (Heb i0 Hob') as [Hebob Hko].
        destruct (fr (tlabel (tnode_at wb i0))) as [p|].
        * destruct Hko as [Hn _]. rewrite Hn in Ha0. destruct Ha0.
        * destruct Hko as [_ Hargs].
          assert (Hin : In (eb a0) (targs (tnode_at B (eb i0))))
            by (rewrite Hargs; apply in_map; exact Ha0).
          pose proof (HgB (eb i0) (eb a0) Hebob Hin).
          apply IH; [lia | lia | left; exact Hkab].
    - intros j [a b] _ _ Hq. simpl. unfold fvals. rewrite Hq. reflexivity.
  Qed.

  (** Every output of the whole graph after the pass denotes what it did
      before. *)
  Theorem window_preserves : denote V interp dflt A = denote V interp dflt B.
  Proof.
    unfold denote. apply Forall2_dn; [exact Houts|].
    intros h g Hg Hs. pose proof HwB as [_ HoB]. exact (stands_dn g h (HoB g Hg) Hs).
  Qed.
End Window.

(** The certificate checker on the windows: if it accepts the pass between
    [wb] and [wa], each fired rule's equation holds whatever values the
    frontier labels take, and the windows sit in the whole graphs as above,
    the whole graph after the pass denotes what the graph before it did. *)
Theorem window_rewrite_preserves :
  forall (V : Type) (interp : nat -> list V -> V) (dflt : V) (fr : nat -> option (nat * nat))
    G nG D roots ps fuel sym gm wb wa fs mp cs fi mi us gi B A eb ea km,
    load_set D roots = Some ps ->
    validate_firings G nG ps fuel sym gm wb wa fs mp cs fi mi us gi = None ->
    (forall interp', (forall l vs, fr l = None -> interp' l vs = interp l vs) ->
       forall k sb t ri d, In (CRule k sb t) cs -> nth_error roots k = Some ri ->
       nth_error D ri = Some d -> rule_eq V interp' dflt D (opt_at sym) d t) ->
    wf_tgraph B -> wf_tgraph A ->
    embeds fr B wb eb snd -> embeds fr A wa ea fst ->
    (forall h g, km h = Some g ->
       h < length (tnodes A) /\ g < length (tnodes B) /\
       tlabel (tnode_at A h) = tlabel (tnode_at B g) /\
       Forall2 (stands wb wa eb ea km) (targs (tnode_at A h)) (targs (tnode_at B g))) ->
    (forall l a b, fr l = Some (a, b) -> km a = Some b) ->
    Forall2 (stands wb wa eb ea km) (touts A) (touts B) ->
    denote V interp dflt A = denote V interp dflt B.
Proof.
  intros V interp dflt fr G nG D roots ps fuel sym gm wb wa fs mp cs fi mi us gi B A eb ea km
    Hl Hv Heq HwB HwA Heb Hea Hkept Hfront Houts.
  destruct (validate_firings_sound G nG D roots ps fuel sym gm wb wa fs mp cs fi mi us gi Hl Hv)
    as (Hval & _ & _ & _).
  destruct (validate_renaming wb wa fs mp fi mi us Hval) as (Hwb & Hwa & _).
  apply (window_preserves V interp dflt fr B A wb wa eb ea km HwB HwA Hwb Hwa Heb Hea Hkept
           Hfront Houts).
  apply (rewrite_preserves V (finterp V interp fr (fvals V interp dflt fr A)) dflt
           G nG D roots ps fuel sym gm wb wa fs mp cs fi mi us gi Hl Hv).
  intros k sb t ri d Hin Hr Hd. refine (Heq _ _ k sb t ri d Hin Hr Hd).
  intros l vs Hn. unfold finterp. rewrite Hn. reflexivity.
Qed.

(** ** The whole graphs are windows of themselves

    With no frontier and each window the whole graph, the hypotheses hold
    and [window_rewrite_preserves] gives [Certify.rewrite_preserves] back:
    the region's statement generalizes the whole graph's. *)

Section Ext.
  Variable V : Type.
  Variables interp interp' : nat -> list V -> V.
  Variable dflt : V.
  Variable Hext : forall l vs, interp' l vs = interp l vs.

  Lemma dvals_from_ext : forall ns env,
    dvals_from V interp' dflt env ns = dvals_from V interp dflt env ns.
  Proof. induction ns as [|n ns IH]; intros env; simpl; [reflexivity|]. rewrite Hext. apply IH. Qed.

  Lemma dnode_ext : forall g i, dnode V interp' dflt g i = dnode V interp dflt g i.
  Proof. intros g i. unfold dnode. rewrite dvals_from_ext. reflexivity. Qed.

  Lemma tden_ext : forall env t, tden V interp' env t = tden V interp env t.
  Proof.
    intros env t. induction t as [x|l ts IH] using tmpl_ind'; simpl; [reflexivity|].
    rewrite Hext. f_equal. induction IH as [|u ts Hu _ IHl]; simpl; [reflexivity|].
    rewrite Hu. f_equal. exact IHl.
  Qed.

  Lemma tden_env : forall env env' t, (forall x, env x = env' x) ->
    tden V interp env t = tden V interp env' t.
  Proof.
    intros env env' t He. induction t as [x|l ts IH] using tmpl_ind'; simpl; [apply He|].
    f_equal. induction IH as [|u ts Hu _ IHl]; simpl; [reflexivity|]. rewrite Hu. f_equal. exact IHl.
  Qed.

  Lemma rule_eq_ext : forall D sym d t,
    rule_eq V interp dflt D sym d t -> rule_eq V interp' dflt D sym d t.
  Proof.
    intros D sym d t H G g gm r tr s σ ψ Hw Hag Hr Hσ Hm.
    rewrite dnode_ext, tden_ext.
    rewrite (H G g gm r tr s σ ψ Hw Hag Hr Hσ Hm). apply tden_env.
    intros x. destruct (s x); [symmetry; apply dnode_ext | reflexivity].
  Qed.
End Ext.

Lemma Forall2_positions : forall (la lb : list nat), length la = length lb ->
  Forall2 (fun a b => exists k, nth_error la k = Some a /\ nth_error lb k = Some b) la lb.
Proof.
  induction la as [|a la IH]; intros [|b lb] Hl; simpl in Hl; try discriminate; constructor.
  - exists 0. split; reflexivity.
  - refine (Forall2_weaken _ _ _ _ _ (IH lb ltac:(lia))).
    intros x y [k Hk]. exists (S k). exact Hk.
Qed.

Corollary window_whole :
  forall (V : Type) (interp : nat -> list V -> V) (dflt : V)
    G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi,
    load_set D roots = Some ps ->
    validate_firings G nG ps fuel sym gm B A fs mp cs fi mi us gi = None ->
    (forall k sb t ri d, In (CRule k sb t) cs -> nth_error roots k = Some ri ->
       nth_error D ri = Some d -> rule_eq V interp dflt D (opt_at sym) d t) ->
    denote V interp dflt A = denote V interp dflt B.
Proof.
  intros V interp dflt G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi Hl Hv Heq.
  destruct (validate_firings_sound G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi Hl Hv)
    as (Hval & _ & _ & _).
  destruct (validate_renaming B A fs mp fi mi us Hval) as (HwB & HwA & _ & _ & _ & _ & Houts & _).
  set (fr := fun _ : nat => @None (nat * nat)).
  assert (Hemb : forall g side, embeds fr g g (fun i => i) side).
  { intros g side i Hi. split; [exact Hi|]. simpl. split; [reflexivity|].
    symmetry. apply map_id. }
  apply (window_rewrite_preserves V interp dflt fr G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi
           B A (fun i => i) (fun i => i) (fun _ => None) Hl Hv).
  - intros interp' Hext k sb t ri d Hin Hr Hd.
    apply (rule_eq_ext V interp interp' dflt (fun l vs => Hext l vs eq_refl)).
    exact (Heq k sb t ri d Hin Hr Hd).
  - exact HwB.
  - exact HwA.
  - apply Hemb.
  - apply Hemb.
  - intros h g Hk. discriminate.
  - intros l a b Hf. discriminate.
  - (* the k-th outputs are the windows' k-th outputs *)
    refine (Forall2_weaken _ _ _ _ _ (Forall2_positions (touts A) (touts B)
                                        (Forall2_len _ _ _ Houts))).
    intros h g [k [Ha Hb]]. right. exists k, h, g. auto.
Qed.
